import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SecretType, type KubeObject, type Secret } from "../../src/kube/types.ts";
import type { Operator } from "../../src/operator/index.ts";
import { decodeData } from "../../src/operator/secret/render.ts";
import { DatabaseType } from "../../src/resources/types.ts";
import { startHarnessKubelet, type HarnessKubelet } from "../support/harness-kubelet.ts";
import { startPodApps, type PodApps } from "../support/pod-apps.ts";
import { counterparts, eventually, manifests, startStack, type Stack } from "./helpers.ts";

// The last condition of a rotation that follows its consumers (docs/credentials.md, "Rotation that follows its
// consumers"): once the workloads rolled, the old login is revoked only when no client session of it is left, where
// the API can tell.
// A client connected with the old Secret's DATABASE_URL (the pooled endpoint, through the service's PgBouncer) holds
// the revocation back at our service until it disconnects, then the login goes promptly. The public API reports no
// sessions: against its emulator the check is skipped and the login goes as the consumers moved.

type Status = {
  connection?: { id: string };
  rotation?: { trigger?: string; retiring?: { id: string; waitingFor?: string[] } };
  conditions?: { type: string; status: string; reason: string }[];
};

describe.each(counterparts)("a rotation and the old login's open sessions against %s", (api) => {
  let stack: Stack;
  let operator: Operator;
  let apps: PodApps;
  let kubelet: HarnessKubelet;

  // As rotation-consumers.test.ts: the harness kubelet runs the pods, on devkube (its own kubelet off) and on a real
  // cluster alike.
  beforeAll(async () => {
    stack = await startStack({ api, devkubeKubelet: false });
    kubelet = await startHarnessKubelet({ kubeConfig: stack.kubeConfig, namespaces: stack.namespaces });
    operator = await stack.startOperator({ followConsumers: true });
    apps = await startPodApps({ kubeConfig: stack.kubeConfig, kube: stack.kube, namespace: stack.namespace });
  }, 120_000);
  afterAll(async () => {
    await apps?.stop();
    await kubelet?.stop();
    await operator?.stop();
    await stack?.stop();
  });

  const statusOf = async () =>
    ((await stack.kube.get<KubeObject>(DatabaseType, stack.namespace, "held"))?.["status"] ?? {}) as Status;
  const connect = async (url: string) => {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
    client.on("error", () => {});
    await client.connect();
    await client.query("select 1");
    return client;
  };
  const works = (client: pg.Client) =>
    client.query("select 1").then(
      () => true,
      () => false,
    );

  it("a client still connected with the old login holds its revocation after the rollout where the API can tell", async () => {
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests(
        {
          apiVersion: "mds.dev/v1alpha1",
          kind: "Project",
          metadata: { name: "held", namespace: stack.namespace },
          spec: { region: "us-east-1" },
        },
        {
          apiVersion: "mds.dev/v1alpha1",
          kind: "Database",
          metadata: { name: "held", namespace: stack.namespace },
          spec: {
            projectRef: { name: "held" },
            connectionSecret: {
              name: "held-db",
              rotation: { gracePeriod: "1s", consumers: "Restart", consumerTimeout: "5m" },
            },
          },
        },
        {
          apiVersion: "apps/v1",
          kind: "Deployment",
          metadata: { name: "heldweb" },
          spec: {
            replicas: 1,
            selector: { matchLabels: { app: "heldweb" } },
            template: kubelet.place({
              metadata: { labels: { app: "heldweb" } },
              spec: {
                containers: [{ name: "app", image: "example/app:1", envFrom: [{ secretRef: { name: "held-db" } }] }],
              },
            }),
          },
        },
      ),
    );
    await eventually(
      async () => {
        if ((await statusOf()).conditions?.find((c) => c.type === "Ready")?.status !== "True")
          throw new Error("not Ready");
      },
      { what: "Database held Ready" },
    );
    await stack.kubectl(["rollout", "status", "deployment/heldweb", "--timeout=120s"]);
    const secret = await stack.kube.get<Secret>(SecretType, stack.namespace, "held-db");
    const oldUrl = decodeData(secret!)["DATABASE_URL"]!;
    const old = (await statusOf()).connection!.id;
    // An app outside the Deployment that read the Secret once and keeps its session.
    const held = await connect(oldUrl);
    try {
      await stack.kubectl(["annotate", "databases.mds.dev/held", "mds.dev/rotate=1", "--overwrite"]);
      await eventually(
        async () => {
          if ((await statusOf()).rotation?.trigger !== "1") throw new Error("not rotated yet");
        },
        { what: "the rotation" },
      );
      await stack.kubectl(["rollout", "status", "deployment/heldweb", "--timeout=120s"]);
      if (api === "emulator") {
        // The public API cannot tell: the login goes once the consumers moved, and the held session with it.
        await eventually(
          async () => {
            if ((await statusOf()).rotation?.retiring !== undefined) throw new Error("still retiring");
          },
          { what: "the old login revoked", timeoutMs: 60_000 },
        );
        expect(await works(held)).toBe(false);
        return;
      }
      // The pods moved; the revocation now waits for the one session left, and says so.
      await eventually(
        async () => {
          const waiting = (await statusOf()).rotation?.retiring?.waitingFor;
          expect(waiting).toEqual(["1 open session of the old login"]);
        },
        { what: "the revocation waits for the open session", timeoutMs: 60_000 },
      );
      expect((await statusOf()).rotation?.retiring?.id).toBe(old);
      expect(await works(held)).toBe(true);
      await held.end();
      const disconnected = Date.now();
      await eventually(
        async () => {
          if ((await statusOf()).rotation?.retiring !== undefined) throw new Error("still retiring");
        },
        { what: "the old login revoked once its session ended", timeoutMs: 30_000 },
      );
      // Promptly: a tenth of the time waited, at least the fast poll, far under this bound on a loaded machine.
      expect(Date.now() - disconnected).toBeLessThan(15_000);
      await expect(connect(oldUrl)).rejects.toThrow();
      expect(apps.failures).toEqual([]);
    } finally {
      await held.end().catch(() => undefined);
    }
  }, 180_000);
});
