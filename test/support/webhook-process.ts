import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import { crdDefinitions, webhookService } from "../../src/resources/crd-files.ts";
import { eventually } from "./eventually.ts";
import { runKubectl } from "./kubectl.ts";

// `mds webhook` as its own process against a devkube (which must not host it on its own thread): listening on a
// free port of 127.0.0.1, addressed by URL, or as the Service crds/ names (devkube maps that Service to the port).
// Resolves once it serves.

const bin = fileURLToPath(new URL("../../bin/mds.js", import.meta.url));

export interface WebhookProcess {
  url: string;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

async function spawnWebhook(
  url: string,
  args: string[],
  kubeconfig: string,
  namespace = "mds-system",
): Promise<WebhookProcess> {
  const child: ChildProcess = spawn(
    process.execPath,
    [bin, "webhook", ...args, "--host", "127.0.0.1", "--kubeconfig", kubeconfig, "--namespace", namespace],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  await new Promise<void>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      if (out.includes("conversion webhook serving")) resolve();
    });
    child.once("exit", (code) => reject(new Error(`mds webhook exited with ${code}: ${out}`)));
  });
  // Its log is read only until it serves: drain the rest so a full pipe never blocks it.
  child.stdout!.resume();
  return {
    url,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once("exit", r));
      child.kill();
      await exited;
    },
  };
}

/** The URL the CRDs should name; `start` runs the process (again, after a stop) at that URL. */
export async function webhookAddress(): Promise<{ url: string; start(kubeconfig: string): Promise<WebhookProcess> }> {
  const port = await freePort();
  const url = `https://127.0.0.1:${port}/convert`;
  return {
    url,
    start: (kubeconfig: string) => spawnWebhook(url, ["--url", url, "--port", String(port)], kubeconfig),
  };
}

/**
 * The webhook as deploy/ runs it, behind the Service crds/ names (in `namespace` when an install moved it there): give
 * `services` to startDevkube, then `start` once that namespace and the CRDs exist. `start` resolves once every mds.dev
 * CRD carries its caBundle, so the first request in the other version converts.
 */
export async function serviceWebhook(namespace = webhookService.namespace): Promise<{
  services: Record<string, string>;
  /** `caBundles: false`: do not wait for the CRDs (they may convert with no webhook yet: an older release's). */
  start(kubeconfig: string, options?: { caBundles?: boolean }): Promise<WebhookProcess>;
}> {
  const port = await freePort();
  const { name, path } = webhookService;
  return {
    services: { [`${namespace}/${name}`]: `127.0.0.1:${port}` },
    async start(kubeconfig: string, options: { caBundles?: boolean } = {}) {
      const url = `https://${name}.${namespace}.svc${path}`;
      const webhook = await spawnWebhook(url, ["--service", name, "--port", String(port)], kubeconfig, namespace);
      try {
        if (options.caBundles !== false) await caBundlesInjected(kubeconfig);
      } catch (err) {
        await webhook.stop();
        throw err;
      }
      return webhook;
    },
  };
}

/** Resolves once every mds.dev CRD carries a caBundle (the webhook injects it). */
export async function caBundlesInjected(kubeconfig: string): Promise<void> {
  const names = crdDefinitions.map((d) => `${d.plural}.mds.dev`);
  await eventually(
    async () => {
      const res = await runKubectl(kubeconfig, [
        "get",
        "crd",
        ...names,
        "-o",
        "jsonpath={range .items[*]}{.spec.conversion.webhook.clientConfig.caBundle}{'\\n'}{end}",
      ]);
      const bundles = res.stdout.split("\n").filter((l) => l.length > 0);
      return res.code === 0 && bundles.length === names.length;
    },
    { what: "the caBundle of every mds.dev CRD" },
  );
}
