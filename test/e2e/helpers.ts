import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import { stringify } from "yaml";
import { pino, type Logger } from "pino";
import { Registry } from "prom-client";
import { startDevkube, type Devkube } from "../../src/devkube/index.ts";
import { runKubectl } from "../../src/devkube/testing/kubectl.ts";
import { createKubeClient, type KubeClient } from "../../src/kube/client.ts";
import { parseKubeConfig, type KubeConfig } from "../../src/kube/kubeconfig.ts";
import { createOperator, type Operator, type OperatorOptions } from "../../src/operator/index.ts";
import { startTestService, type TestService } from "../../src/service/testing.ts";

// One devkube + one service per test file; operators are started and stopped per scenario as processes would be.

export async function eventually<T>(fn: () => Promise<T> | T, options: { timeoutMs?: number; intervalMs?: number; what?: string } = {}): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 45_000);
  let last: unknown;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`eventually timed out${options.what ? ` waiting for ${options.what}` : ""}: ${(last as Error)?.message ?? last}`, { cause: last });
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 100));
  }
}

export interface Stack {
  devkube: Devkube;
  service: TestService;
  kubeConfig: KubeConfig;
  kube: KubeClient;
  /** Everything every operator of this stack logged, for the planted-secret scan. */
  logs: string[];
  kubectl(args: string[], input?: string): Promise<string>;
  startOperator(overrides?: Partial<OperatorOptions>): Promise<Operator>;
  stop(): Promise<void>;
}

export async function startStack(): Promise<Stack> {
  const dir = await mkdtemp(path.join(tmpdir(), "mds-e2e-"));
  const [devkube, service] = await Promise.all([startDevkube({ dir: path.join(dir, "kube"), port: 0 }), startTestService()]);
  // The operator's own loader, as \`mds operator\` uses it; the tests drive devkube "as a user" through kubectl.
  const kubeConfig = parseKubeConfig(devkube.kubeconfig);
  const kube = createKubeClient(kubeConfig);
  const logs: string[] = [];
  const operators: Operator[] = [];
  const cacheDir = path.join(dir, "kubectl-cache");

  async function kubectl(args: string[], input?: string): Promise<string> {
    const r = await runKubectl(devkube.kubeconfigPath, args, { ...(input === undefined ? {} : { input }), cacheDir });
    if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")} failed: ${r.stderr.trim()}`);
    return r.stdout;
  }

  await kubectl(["apply", "-f", path.resolve(import.meta.dirname, "../../crds")]);
  // kubectl caches discovery: make it see the new CRDs before the first apply of a custom resource.
  await eventually(() => kubectl(["get", "mdsdb,mdsproject,mdsrestore", "-A"]), { what: "CRDs served" });
  await kubectl(
    ["apply", "-f", "-"],
    JSON.stringify({ apiVersion: "v1", kind: "Secret", metadata: { name: "mds-credentials", namespace: "default" }, stringData: { token: service.token } }),
  );

  return {
    devkube,
    service,
    kubeConfig,
    kube,
    logs,
    kubectl,
    async startOperator(overrides = {}) {
      const sink = new Writable({
        write(chunk: Buffer, _enc, cb) {
          logs.push(chunk.toString());
          cb();
        },
      });
      const logger: Logger = pino({ level: "debug" }, sink);
      const operator = createOperator({
        kubeConfig,
        apiUrl: service.url,
        defaultCredentials: { secretNamespace: "default", secretName: "mds-credentials", key: "token" },
        namespaces: undefined,
        instanceId: "e2e",
        concurrency: 4,
        pollIntervals: { fastMs: 200, slowMs: 30_000 },
        logger,
        metrics: new Registry(),
        canWrite: () => true,
        ...overrides,
      });
      operators.push(operator);
      await operator.start();
      return operator;
    },
    async stop() {
      await Promise.all(operators.map((o) => o.stop().catch(() => {})));
      await Promise.all([devkube.stop(), service.stop()]);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Several objects as one multi-document YAML stream for `kubectl apply -f -`. */
export function manifests(...objs: object[]): string {
  return objs.map((o) => stringify(o)).join("---\n");
}
