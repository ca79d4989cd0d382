import { parseArgs } from "node:util";
import { pino } from "pino";
import { startDevkube } from "./index.ts";

// `mds devkube --dir DIR [--port P] [--host H] [--log-level L] [--pod-ready-delay MS] [--no-kubelet]`: the Kubernetes-compatible
// development server. Objects persist under DIR; DIR/kubeconfig is (re)written once it serves.

export const devkubeHelp = `usage: mds devkube --dir DIR [--port P] [--host H] [--log-level L] [--pod-ready-delay MS] [--no-kubelet]

  --dir DIR         where objects, certificates, the token and the kubeconfig live (required)
  --port P          port to listen on (default 6443; 0 picks a free port)
  --host H          address to listen on (default 127.0.0.1)
  --log-level L     pino level: fatal, error, warn, info, debug, trace, silent (default info)
  --pod-ready-delay MS
                    milliseconds from a pod's scheduling to Running and Ready (default 200)
  --no-kubelet      do not run pods: they stay Pending on their node until a client writes their status`;

export async function runDevkube(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        dir: { type: "string" },
        port: { type: "string", default: "6443" },
        host: { type: "string", default: "127.0.0.1" },
        "log-level": { type: "string", default: "info" },
        "pod-ready-delay": { type: "string", default: "200" },
        kubelet: { type: "boolean", default: true },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
      allowNegative: true,
    }));
  } catch (err) {
    console.error(`mds devkube: ${(err as Error).message}\n\n${devkubeHelp}`);
    return 2;
  }
  if (values.help) {
    console.log(devkubeHelp);
    return 0;
  }
  if (!values.dir) {
    console.error(`mds devkube: --dir is required\n\n${devkubeHelp}`);
    return 2;
  }
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error(`mds devkube: --port must be an integer between 0 and 65535, got "${values.port}"`);
    return 2;
  }
  const readyDelayMs = Number(values["pod-ready-delay"]);
  if (!Number.isInteger(readyDelayMs) || readyDelayMs < 0) {
    console.error(
      `mds devkube: --pod-ready-delay must be a whole number of milliseconds, got "${values["pod-ready-delay"]}"`,
    );
    return 2;
  }
  const levels = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];
  const level = values["log-level"] ?? "info";
  if (!levels.includes(level)) {
    console.error(`mds devkube: --log-level must be one of ${levels.join(", ")}, got "${level}"`);
    return 2;
  }
  const logger = pino({ level, base: { component: "devkube" } });
  const devkube = await startDevkube({
    dir: values.dir,
    port,
    host: values.host ?? "127.0.0.1",
    logger,
    pods: { readyDelayMs, kubelet: values.kubelet ?? true },
  });
  console.log(
    `devkube serving at ${devkube.url}\nkubeconfig: ${devkube.kubeconfigPath}\n\n  export KUBECONFIG=${devkube.kubeconfigPath}\n  kubectl get namespaces`,
  );
  await new Promise<void>((resolve) => {
    const onSignal = (): void => {
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
      resolve();
    };
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
  });
  await devkube.stop();
  logger.info("devkube stopped");
  return 0;
}
