import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { createKubeClient } from "../kube/client.ts";
import { commandKubeConfig } from "./kube-config.ts";
import { startWebhook } from "../webhook/index.ts";
import type { WebhookAddress } from "../webhook/crd-ca-bundle.ts";
import pino from "pino";

export const webhookHelp = `usage: mds webhook [options]

Serves the CRD conversion webhook of the mds.dev kinds (v1alpha1 <-> v1beta1) over HTTPS at /convert. It keeps
its CA and serving certificate in a Secret of its namespace (made at first start, renewed before expiry) and
injects the CA into the caBundle of the mds.dev CRDs that point at it. Runs as its own Deployment (deploy/), apart
from the operator, so rolling the operator back leaves the CRDs readable.

  --namespace <ns>     its namespace: the Secret's and the Service's (default: the pod's namespace, else mds-system)
  --service <name>     the Service the CRDs name (default: mds-webhook); the certificate names <name>.<ns>.svc
  --url <url>          instead of a Service: the URL the CRDs name (outside a cluster: devkube, tests)
  --secret <name>      the Secret holding the CA and the serving certificate (default: mds-webhook-tls)
  --port <port>        HTTPS port (default: 9443)
  --host <address>     address to listen on (default: all)
  --kubeconfig <file>  kubeconfig to reach the API server (default: KUBECONFIG, else in-cluster, else ~/.kube/config)
  --context <name>     kubeconfig context
  --log-level <level>  trace, debug, info, warn, error (default: info)`;

const podNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

function podNamespace(): string | undefined {
  try {
    return readFileSync(podNamespaceFile, "utf8").trim() || undefined;
  } catch {
    return undefined;
  }
}

export async function runWebhook(argv: string[]): Promise<number> {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        namespace: { type: "string" },
        service: { type: "string" },
        url: { type: "string" },
        secret: { type: "string" },
        port: { type: "string" },
        host: { type: "string" },
        kubeconfig: { type: "string" },
        context: { type: "string" },
        "log-level": { type: "string" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
    }));
  } catch (err) {
    console.error(`mds webhook: ${err instanceof Error ? err.message : String(err)}\n\n${webhookHelp}`);
    return 2;
  }
  if (values["help"]) {
    console.log(webhookHelp);
    return 0;
  }
  const str = (k: string) => (typeof values[k] === "string" ? values[k] : undefined);
  const port = Number(str("port") ?? "9443");
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error(`mds webhook: --port ${str("port")} is not a port number (0-65535)`);
    return 2;
  }
  const level = str("log-level") ?? "info";
  if (!["trace", "debug", "info", "warn", "error"].includes(level)) {
    console.error(`mds webhook: --log-level ${level} is not one of trace, debug, info, warn, error`);
    return 2;
  }
  const url = str("url");
  if (url !== undefined && !/^https:\/\/[^/]+\/convert$/.test(url)) {
    console.error(`mds webhook: --url ${url} must be https://<host>[:<port>]/convert`);
    return 2;
  }
  if (url !== undefined && str("service") !== undefined) {
    console.error("mds webhook: give --service or --url, not both");
    return 2;
  }
  const namespace = str("namespace") ?? podNamespace() ?? "mds-system";
  const address: WebhookAddress =
    url !== undefined ? { url } : { service: { namespace, name: str("service") ?? "mds-webhook" } };
  // Its own logger, not the operator's module (which would load the whole operator); it logs no secret material.
  const logger = pino({ level, base: { name: "mds-webhook", pid: process.pid } });
  const kubeConfig = commandKubeConfig({ kubeconfig: str("kubeconfig"), context: str("context") }, (message) =>
    logger.error({ err: message }, "Cannot load the Kubernetes configuration"),
  );
  if (kubeConfig === undefined) return 2;
  const kube = createKubeClient(kubeConfig, { timeoutMs: 30_000, fieldManager: "mds-webhook" });
  const webhook = await startWebhook({
    kube,
    kubeConfig,
    logger,
    namespace,
    secretName: str("secret") ?? "mds-webhook-tls",
    address,
    port,
    host: str("host"),
  });
  await new Promise<void>((resolve) => {
    for (const s of ["SIGINT", "SIGTERM"] as const) process.once(s, () => resolve());
  });
  await webhook.stop();
  await kubeConfig.close();
  return 0;
}
