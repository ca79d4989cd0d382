import { startDevkube, type Devkube, type DevkubeOptions } from "@mds/devkube";
import { renderCrdBundle } from "../../src/resources/crd-files.ts";
import { runKubectl } from "./kubectl.ts";
import { serviceWebhook, type WebhookProcess } from "./webhook-process.ts";

// devkube with the CRDs of crds/ installed as a user installs them, and the conversion webhook they name running
// beside it (as deploy/ runs it in a cluster), so objects read and write in both served versions.

export interface DevkubeWithCrds {
  devkube: Devkube;
  webhook: WebhookProcess;
  /** Stops the webhook, then devkube. */
  stop(): Promise<void>;
}

export async function startDevkubeWithCrds(options: DevkubeOptions): Promise<DevkubeWithCrds> {
  const address = await serviceWebhook();
  const devkube = await startDevkube({ ...options, services: { ...options.services, ...address.services } });
  try {
    const kubectl = async (args: string[], input?: string) => {
      const res = await runKubectl(devkube.kubeconfigPath, args, input === undefined ? {} : { input });
      if (res.code !== 0) throw new Error(`kubectl ${args.join(" ")} failed: ${res.stderr}`);
    };
    await kubectl(["apply", "-f", "-"], renderCrdBundle());
    await kubectl(["create", "namespace", "mds-system"]);
    const webhook = await address.start(devkube.kubeconfigPath);
    return {
      devkube,
      webhook,
      async stop() {
        await webhook.stop();
        await devkube.stop();
      },
    };
  } catch (err) {
    await devkube.stop();
    throw err;
  }
}
