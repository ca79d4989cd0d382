import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { KubeObject } from "../../src/kube/types.ts";
import type { Operator } from "../../src/operator/index.ts";
import { DatabaseType } from "../../src/resources/types.ts";
import { counterparts, eventually, manifests, startStack, type Stack } from "./helpers.ts";

// Expiry, with real durations: the time is computed once into status.expiresAt and survives an
// operator restart; at it the operator deletes the resource and (deletionPolicy Delete) its remote database; a
// protected one is kept, and condition Expired says so.

let stack: Stack;
type Status = { id?: string; expiresAt?: string; conditions?: { type: string; status: string; reason: string }[] };

const project = () => ({
  apiVersion: "mds.dev/v1alpha1",
  kind: "Project",
  metadata: { name: "expiring", namespace: stack.namespace },
  spec: { region: "us-east-1" },
});
const database = (name: string, extra: object) => ({
  apiVersion: "mds.dev/v1alpha1",
  kind: "Database",
  metadata: { name, namespace: stack.namespace },
  spec: { projectRef: { name: "expiring" }, deletionPolicy: "Delete", ...extra },
});
const statusOf = async (name: string) =>
  (await stack.kube.get<KubeObject>(DatabaseType, stack.namespace, name))?.["status"] as Status | undefined;
const ready = (name: string) =>
  eventually(
    async () => {
      const s = await statusOf(name);
      if (!s?.conditions?.some((c) => c.type === "Ready" && c.status === "True")) throw new Error(`${name} not ready`);
      return s;
    },
    { what: `${name} Ready`, timeoutMs: 60_000 },
  );
const remoteStatus = async (id: string) =>
  (
    await fetch(`${stack.service.url}/v1/databases/${id}`, {
      headers: { authorization: `Bearer ${stack.service.token}` },
    })
  ).status;

describe.each(counterparts)("against %s", (counterpart) => {
  let operator: Operator | undefined;
  beforeAll(async () => {
    stack = await startStack({ api: counterpart });
    operator = await stack.startOperator();
  }, 120_000);
  afterAll(async () => {
    await operator?.stop();
    const leaks = stack === undefined ? "" : await stack.leaks();
    await stack?.stop();
    expect(leaks).toBe("");
  });

  it("expires at the stored time across an operator restart, deleting the resource and its database; a protected one stays", async () => {
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests(
        project(),
        database("short-lived", { expireAfter: "40s" }),
        database("protected", { expireAfter: "20s", deletionProtection: true }),
      ),
    );
    const s = await ready("short-lived");
    const created = Date.parse(
      (await stack.kube.get<KubeObject>(DatabaseType, stack.namespace, "short-lived"))!.metadata.creationTimestamp!,
    );
    expect(Date.parse(s.expiresAt!)).toBe(created + 40_000);
    const columns = await stack.kubectl(["get", "databases.mds.dev", "short-lived"]);
    expect(columns).toMatch(/EXPIRES/);
    expect(columns).toContain(s.expiresAt!);

    // A new operator reads the stored time: the same expiresAt, and it still deletes on time.
    await operator!.stop();
    operator = await stack.startOperator();
    await eventually(
      async () => {
        const out = await stack.kubectl([
          "get",
          "databases.mds.dev",
          "short-lived",
          "--ignore-not-found",
          "-o",
          "name",
        ]);
        if (out.trim() !== "") {
          expect((await statusOf("short-lived"))?.expiresAt).toBe(s.expiresAt);
          throw new Error("short-lived still there");
        }
      },
      { what: "short-lived expired and deleted", timeoutMs: 90_000 },
    );
    expect(Date.now()).toBeGreaterThanOrEqual(created + 40_000);
    expect(await remoteStatus(s.id!)).toBe(404);
    const events = await stack.kubectl([
      "get",
      "events",
      "--field-selector",
      "involvedObject.name=short-lived",
      "-o",
      "json",
    ]);
    expect(events).toContain('"reason": "Expiring"');
    expect(events).toContain('"reason": "Expired"');

    const kept = await eventually(
      async () => {
        const c = (await statusOf("protected"))?.conditions?.find((x) => x.type === "Expired");
        if (c?.status !== "True") throw new Error(`not marked expired: ${JSON.stringify(c)}`);
        return c;
      },
      { what: "protected Expired=True", timeoutMs: 60_000 },
    );
    expect(kept.reason).toBe("DeletionProtected");
    const p = (await statusOf("protected"))!;
    expect(await remoteStatus(p.id!)).toBe(200);
    // Lifting the protection lets the expiry happen.
    await stack.kubectl([
      "patch",
      "databases.mds.dev",
      "protected",
      "--type=merge",
      "-p",
      '{"spec":{"deletionProtection":false}}',
    ]);
    await eventually(
      async () => {
        const out = await stack.kubectl(["get", "databases.mds.dev", "protected", "--ignore-not-found", "-o", "name"]);
        if (out.trim() !== "") throw new Error("protected still there");
      },
      { what: "protected deleted once unprotected", timeoutMs: 60_000 },
    );
    expect(await remoteStatus(p.id!)).toBe(404);
  }, 300_000);
});
