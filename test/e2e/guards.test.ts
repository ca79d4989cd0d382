import { pino } from "pino";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLeaderElector, createLeaseClient, type LeaderElector } from "../../src/operator/leader-election.ts";
import { SecretType, type KubeObject } from "../../src/kube/types.ts";
import { DatabaseType } from "../../src/resources/types.ts";
import { startFaultProxy, type FaultProxy } from "../support/fault-proxy.ts";
import { eventually, itNeedsDevkube, manifests, startStack, type Stack } from "./helpers.ts";

// Invalid resources are refused by the schema or reported in Synced=False with what to fix, and nothing remote
// changes; an API outage is reported and converges once the service is back; of two replicas only the leader writes.

let stack: Stack;
let proxy: FaultProxy;

beforeAll(async () => {
  stack = await startStack();
  proxy = await startFaultProxy({ target: stack.service.url });
  await stack.kubectl(
    ["apply", "-f", "-"],
    manifests({
      apiVersion: "mds.dev/v1alpha1",
      kind: "Project",
      metadata: { name: "base", namespace: stack.namespace },
      spec: { region: "us-east-1" },
    }),
  );
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  await proxy?.stop();
});

const database = (name: string, spec: object) => ({
  apiVersion: "mds.dev/v1alpha1",
  kind: "Database",
  metadata: { name, namespace: stack.namespace },
  spec,
});

async function remoteDatabaseCount(): Promise<number> {
  const res = await fetch(`${stack.service.url}/v1/databases`, {
    headers: { authorization: `Bearer ${stack.service.token}` },
  });
  return ((await res.json()) as { data: unknown[] }).data.length;
}

async function condition(name: string, type: string) {
  const obj = await stack.kube.get<KubeObject>(DatabaseType, stack.namespace, name);
  return (
    obj?.["status"] as { conditions?: { type: string; status: string; reason: string; message: string }[] } | undefined
  )?.conditions?.find((c) => c.type === type);
}

async function waitCondition(name: string, type: string, want: { status?: string; reason?: string }) {
  return eventually(
    async () => {
      const c = await condition(name, type);
      if (
        (want.status !== undefined && c?.status !== want.status) ||
        (want.reason !== undefined && c?.reason !== want.reason)
      )
        throw new Error(`${name} ${type}: ${JSON.stringify(c)}`);
      return c!;
    },
    { what: `${name} ${type} ${JSON.stringify(want)}` },
  );
}

async function kubectlFails(input: string): Promise<string> {
  try {
    await stack.kubectl(["apply", "-f", "-"], input);
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error("kubectl apply succeeded");
}

describe("invalid resources", () => {
  it("are refused by the schema (two projects named, unknown region, changed immutable field) and nothing remote changes", async () => {
    const operator = await stack.startOperator();
    const before = await remoteDatabaseCount();
    expect(
      await kubectlFails(
        manifests(database("both", { projectRef: { name: "base" }, projectId: "proj_c0000000000000000000000001" })),
      ),
    ).toMatch(/exactly one of projectRef.name or projectId/);
    expect(
      await kubectlFails(manifests(database("mars", { projectRef: { name: "base" }, region: "mars-north-1" }))),
    ).toMatch(/region/);
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests(database("fixed", { projectRef: { name: "base" }, region: "us-east-1" })),
    );
    await waitCondition("fixed", "Ready", { status: "True" });
    expect(
      await kubectlFails(manifests(database("fixed", { projectRef: { name: "base" }, region: "eu-west-3" }))),
    ).toMatch(/region is immutable/);
    expect(await remoteDatabaseCount()).toBe(before + 1);
    await operator.stop();
  });

  it("report a missing credentials Secret in Synced=False with what to fix, and create nothing", async () => {
    const operator = await stack.startOperator();
    const before = await remoteDatabaseCount();
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests(
        database("nocreds", { projectRef: { name: "base" }, credentials: { secretRef: { name: "team-token" } } }),
      ),
    );
    const synced = await waitCondition("nocreds", "Synced", { status: "False", reason: "CredentialsMissing" });
    expect(synced.message).toContain(`"${stack.namespace}/team-token"`);
    expect(await remoteDatabaseCount()).toBe(before);
    const described = await stack.kubectl(["describe", "mdsdb", "nocreds"]);
    expect(described).toContain("CredentialsMissing");
    await stack.kubectl(["delete", "mdsdb", "nocreds", "--wait=true"]);
    await operator.stop();
  });
});

describe("API outage", () => {
  it("reports Synced=False with the cause, backs off, and converges once the service is back", async () => {
    await proxy.startOutage("unavailable");
    const operator = await stack.startOperator({ apiUrl: proxy.url });
    await stack.kubectl(["apply", "-f", "-"], manifests(database("during-outage", { projectRef: { name: "base" } })));
    const synced = await waitCondition("during-outage", "Synced", { status: "False", reason: "ApiUnavailable" });
    expect(synced.message).toMatch(/unavailable/);
    await proxy.endOutage();
    await waitCondition("during-outage", "Ready", { status: "True" });
    await waitCondition("during-outage", "Synced", { status: "True" });
    await operator.stop();
  });
});

describe("watch interruptions", () => {
  itNeedsDevkube(
    "the operator follows changes made while its watches were closed and while their history expired (410 Gone)",
    "closeWatches() and setWatchHistoryLimit() to end every watch and expire its history on demand",
    async () => {
      const devkube = stack.devkube!;
      const operator = await stack.startOperator();
      try {
        await stack.kubectl(["apply", "-f", "-"], manifests(database("steady", { projectRef: { name: "base" } })));
        await waitCondition("steady", "Ready", { status: "True" });
        devkube.closeWatches();
        await stack.kubectl(["apply", "-f", "-"], manifests(database("after-close", { projectRef: { name: "base" } })));
        await waitCondition("after-close", "Ready", { status: "True" });
        // Several changes while the watches reconnect: their resourceVersions fall out of a 2-event history.
        devkube.setWatchHistoryLimit(2);
        devkube.closeWatches();
        await stack.kubectl(
          ["apply", "-f", "-"],
          manifests(
            ...["expired-1", "expired-2", "expired-3"].map((n) => database(n, { projectRef: { name: "base" } })),
          ),
        );
        await stack.kubectl(["delete", "secret", "steady"]);
        for (const name of ["expired-1", "expired-2", "expired-3"])
          await waitCondition(name, "Ready", { status: "True" });
        await eventually(
          async () => {
            if ((await stack.kube.get(SecretType, stack.namespace, "steady")) === undefined)
              throw new Error("Secret steady not rebuilt");
          },
          { what: "Secret steady rebuilt" },
        );
      } finally {
        devkube.setWatchHistoryLimit(1000);
        await operator.stop();
      }
    },
  );
});

describe("two replicas", () => {
  it("only the leader writes; the standby takes over when the leader steps down", async () => {
    const electors: LeaderElector[] = [];
    const registries = [new Registry(), new Registry()];
    const replicas = [];
    for (const [i, identity] of ["replica-a", "replica-b"].entries()) {
      const elector = createLeaderElector({
        lease: createLeaseClient(stack.kube, stack.namespace, "mds-operator-e2e"),
        identity,
        logger: pino({ level: "silent" }),
        retryPeriodMs: 200,
        renewDeadlineMs: 1_000,
        leaseDurationMs: 2_000,
      });
      electors.push(elector);
      elector.start();
      if (i === 0) await eventually(() => expect(elector.isLeader()).toBe(true), { what: "replica-a leads" });
      replicas.push(await stack.startOperator({ canWrite: () => elector.isLeader(), metrics: registries[i]! }));
    }
    await stack.kubectl(["apply", "-f", "-"], manifests(database("led", { projectRef: { name: "base" } })));
    await waitCondition("led", "Ready", { status: "True" });
    const writesOf = async (r: Registry) =>
      ((await r.getSingleMetric("mds_operator_kube_writes_total")?.get())?.values ?? []).reduce(
        (n, v) => n + v.value,
        0,
      );
    expect(await writesOf(registries[0]!)).toBeGreaterThan(0);
    expect(await writesOf(registries[1]!)).toBe(0);

    await electors[0]!.stop();
    await replicas[0]!.stop();
    await eventually(() => expect(electors[1]!.isLeader()).toBe(true), { what: "replica-b leads" });
    await stack.kubectl(["apply", "-f", "-"], manifests(database("led-2", { projectRef: { name: "base" } })));
    await waitCondition("led-2", "Ready", { status: "True" });
    expect(await writesOf(registries[1]!)).toBeGreaterThan(0);
    await electors[1]!.stop();
    await replicas[1]!.stop();
  });
});
