import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { KubeObject } from "../../src/kube/types.ts";
import { DatabaseType, ProjectType } from "../../src/resources/types.ts";
import { eventually, manifests, startStack, type Stack } from "./helpers.ts";

// Fairness between teams: one operator, two teams with their own workspace tokens. Team A applies
// a burst of Databases in one go; team B then applies one. The operator's work queue serves namespaces in turn, so
// B's Database is created after a few of A's, not after all of them, and is Ready while A's burst is still under way.
// Asserted on order (how many of A's were Ready when B's was), never on wall-clock time: the machine may be slow.

const burst = 60;
// Each team's token has its own budget at the operator (src/client/rate-budget.ts), and the service provisions
// workspaces in turn. At 4 requests/s A's 60 creates take 15 s, longer than the service needs for them: the operator's
// queue is then what A's burst waits on, as it is at 1,000 Databases with the default 10/s.
const apiRateLimit = { requestsPerSecond: 4, burst: 4 };

type Cond = { type: string; status: string };
const isReady = (o: KubeObject | undefined) =>
  ((o?.["status"] as { conditions?: Cond[] } | undefined)?.conditions ?? []).some(
    (c) => c.type === "Ready" && c.status === "True",
  );

describe("fairness between teams", () => {
  let stack: Stack;
  const ns = (team: "a" | "b") => stack.namespaceOf(`team-${team}`);

  beforeAll(async () => {
    stack = await startStack({ namespaces: ["team-a", "team-b"] });
    for (const team of ["a", "b"] as const) {
      const token = await stack.service.createToken(`fair-${team}`);
      await stack.kubectl(
        ["create", "-f", "-"],
        JSON.stringify({
          apiVersion: "v1",
          kind: "Secret",
          metadata: { name: "mds-credentials", namespace: ns(team) },
          stringData: { token },
        }),
      );
    }
    await stack.startOperator({ apiRateLimit });
  }, 120_000);
  afterAll(async () => {
    await stack?.stop();
  });

  const project = (namespace: string) => ({
    apiVersion: "mds.dev/v1alpha1",
    kind: "Project",
    metadata: { name: "app", namespace },
    spec: { region: "us-east-1" },
  });
  const database = (namespace: string, name: string) => ({
    apiVersion: "mds.dev/v1alpha1",
    kind: "Database",
    metadata: { name, namespace },
    spec: { projectRef: { name: "app" }, deletionPolicy: "Delete" },
  });

  it(`gets team B's one Database Ready while team A's burst of ${burst} is still in progress`, async () => {
    // Both projects Ready first: B's database must wait for nothing but the queue.
    await stack.kubectl(["apply", "-f", "-"], manifests(project(ns("a")), project(ns("b"))));
    for (const team of ["a", "b"] as const) {
      await eventually(
        async () => expect(isReady(await stack.kube.get<KubeObject>(ProjectType, ns(team), "app"))).toBe(true),
        { what: `team ${team}'s project Ready`, timeoutMs: 60_000 },
      );
    }

    // Team A's burst, in one apply; then team B's one Database once the operator has A's burst queued (seen: the
    // first of A's has a status), so B's key is added behind all of A's in arrival order.
    const names = Array.from({ length: burst }, (_, i) => `burst-${i}`);
    await stack.kubectl(["apply", "-f", "-"], manifests(...names.map((n) => database(ns("a"), n))));
    await eventually(
      async () =>
        expect((await stack.kube.get<KubeObject>(DatabaseType, ns("a"), "burst-0"))?.["status"]).toBeDefined(),
      { what: "A's burst being reconciled", timeoutMs: 60_000 },
    );
    await stack.kubectl(["apply", "-f", "-"], manifests(database(ns("b"), "orders")));

    // Watch both teams until B's is Ready: how many of A's were Ready by then.
    const aReadyWhenBReady = await eventually(
      async () => {
        if (!isReady(await stack.kube.get<KubeObject>(DatabaseType, ns("b"), "orders")))
          throw new Error("team B's Database not Ready yet");
        // Listed after B's was seen Ready: if anything, this counts too many of A's, never too few.
        const aList = await stack.kube.list<KubeObject>(DatabaseType, { namespace: ns("a") });
        return {
          ready: aList.items.filter(isReady).length,
          created: aList.items.filter((o) => (o["status"] as { id?: string } | undefined)?.id !== undefined).length,
        };
      },
      { what: "team B's Database Ready", timeoutMs: 120_000, intervalMs: 50 },
    );
    // In arrival order B's create would have waited for all of A's creates, and its provisioning behind theirs.
    const progress = `when team B's Database was Ready, ${aReadyWhenBReady.ready} of team A's ${burst} were Ready and ${aReadyWhenBReady.created} created`;
    console.log(progress);
    expect(aReadyWhenBReady.ready, progress).toBeLessThan(burst / 2);

    // A's burst still completes.
    await eventually(
      async () => {
        const aList = await stack.kube.list<KubeObject>(DatabaseType, { namespace: ns("a") });
        expect(aList.items.filter(isReady).length).toBe(burst);
      },
      { what: `all ${burst} of team A's Databases Ready`, timeoutMs: 300_000, intervalMs: 500 },
    );
  }, 480_000);
});
