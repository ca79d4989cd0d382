import type { Logger } from "pino";
import type { KubeClient } from "../kube/client.ts";
import { createInformer, type Informer } from "../kube/informer.ts";
import type { KubeConfig } from "../kube/kubeconfig.ts";
import { ensureServingCertificate, type ServingMaterial } from "./certificates.ts";
import { CrdType, injectCaBundle, mdsCrdNames, type WebhookAddress } from "./crd-ca-bundle.ts";
import { startWebhookServer } from "./server.ts";

// `mds webhook` without its flags: the serving certificate (certificates.ts), the HTTPS server (server.ts) and the
// caBundle kept in the CRDs (crd-ca-bundle.ts), for as long as it runs.

interface WebhookOptions {
  kube: KubeClient;
  kubeConfig: KubeConfig;
  logger: Logger;
  /** The webhook's namespace: its certificate Secret lives there. */
  namespace: string;
  secretName: string;
  /** How the CRDs address it. A Service is reached by <name>.<namespace>.svc; a URL by its host. */
  address: WebhookAddress;
  port: number;
  host?: string | undefined;
}

export interface Webhook {
  port: number;
  caCert: string;
  stop(): Promise<void>;
}

function hostsOf(address: WebhookAddress): string[] {
  if ("url" in address) return [new URL(address.url).hostname.replace(/^\[|\]$/g, "")];
  const { name, namespace } = address.service;
  return [`${name}.${namespace}.svc`, `${name}.${namespace}.svc.cluster.local`, `${name}.${namespace}`];
}

export async function startWebhook(options: WebhookOptions): Promise<Webhook> {
  const { kube, logger, address } = options;
  const certificate = () =>
    ensureServingCertificate(kube, {
      namespace: options.namespace,
      secretName: options.secretName,
      hosts: hostsOf(address),
    });
  let material: ServingMaterial = await certificate();
  const server = await startWebhookServer({ material, port: options.port, host: options.host, logger });
  let stopped = false;
  const retries = new Set<NodeJS.Timeout>();

  const inject = (crd: Parameters<typeof injectCaBundle>[1]) => {
    injectCaBundle(kube, crd, material.caCert, address).then(
      (patched) => patched && logger.info({ crd: crd.metadata.name }, "caBundle injected"),
      (err: unknown) => {
        // A conflict means a newer CRD, whose watch event comes next; anything else is tried again shortly.
        logger.warn({ crd: crd.metadata.name, err: String(err) }, "cannot inject caBundle; trying again");
        const timer = setTimeout(() => {
          retries.delete(timer);
          const latest = informer.get(undefined, crd.metadata.name);
          if (!stopped && latest) inject(latest);
        }, 5_000);
        retries.add(timer);
      },
    );
  };
  const informer: Informer<Parameters<typeof injectCaBundle>[1]> = createInformer({
    kubeConfig: options.kubeConfig,
    client: kube,
    type: CrdType,
    logger,
    onEvent: (event, crd) => {
      if (event !== "delete" && mdsCrdNames.includes(crd.metadata.name)) inject(crd);
    },
  });
  await informer.start();

  // The serving certificate's renewal: re-read (another replica may have renewed it) or re-issue, then serve it.
  let renewal: NodeJS.Timeout | undefined;
  const scheduleRenewal = () => {
    const wait = Math.max(1_000, Math.min(material.renewAt.getTime() - Date.now(), 2 ** 31 - 1));
    renewal = setTimeout(() => {
      certificate().then(
        (next) => {
          material = next;
          server.setMaterial(next);
          for (const crd of informer.list()) inject(crd);
          logger.info({ renewAt: next.renewAt.toISOString() }, "serving certificate renewed");
          if (!stopped) scheduleRenewal();
        },
        (err: unknown) => {
          logger.error({ err: String(err) }, "cannot renew the serving certificate; trying again in a minute");
          if (!stopped) renewal = setTimeout(scheduleRenewal, 60_000);
        },
      );
    }, wait);
  };
  scheduleRenewal();
  logger.info({ port: server.port, renewAt: material.renewAt.toISOString() }, "conversion webhook serving");

  return {
    port: server.port,
    caCert: material.caCert,
    async stop() {
      stopped = true;
      clearTimeout(renewal);
      for (const t of retries) clearTimeout(t);
      await informer.stop();
      await server.close();
    },
  };
}
