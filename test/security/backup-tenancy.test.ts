import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { KubeObject } from "../../src/kube/types.ts";
import { externalIdAnnotation } from "../../src/operator/annotations.ts";
import type { Operator } from "../../src/operator/index.ts";
import { DatabaseBackupType } from "../../src/resources/database-backup/schema.ts";
import { DatabaseType } from "../../src/resources/types.ts";
import { eventually, manifests, startStack, type Stack } from "../e2e/helpers.ts";

// Team B (namespace b, its own token) tries to make the operator back up team A's database (the operator's own
// namespace, served by the operator's token, which can see A's database: any path that lent that token to B would
// succeed) through everything B can write: a DatabaseBackup by id (with and without a token), a databaseRef into
// A's namespace, a Database of its own whose status, spec.externalId or id annotation names A's database, and a
// DatabaseBackup whose status names A's database or A's backup. None may take a backup of A's database, nor report
// one of A's backups as B's. Against our service, the counterpart that takes backups on request (the public API takes
// none: test/e2e/backup.test.ts).

type Status = {
  phase?: string;
  reason?: string;
  backupId?: string;
  sizeBytes?: number;
  conditions?: { type: string; status: string; reason: string; message: string }[];
};

describe("team B cannot back up team A's database", () => {
  let stack: Stack;
  let operator: Operator | undefined;
  let tokenA = "";
  let dbA = "";
  let backupOfA = "";
  let dbB = "";
  const ns = (team: "a" | "b") => (team === "a" ? stack.namespace : stack.namespaceOf(team));

  /** A's backups, as team A sees them at the service. */
  const backupsOfA = async () => {
    const res = await fetch(`${stack.service.url}/v1/databases/${dbA}/backups`, {
      headers: { authorization: `Bearer ${tokenA}` },
    });
    expect(res.status).toBe(200);
    return ((await res.json()) as { data: { id: string }[] }).data.map((b) => b.id).sort();
  };
  const readyId = (namespace: string, name: string) =>
    eventually(
      async () => {
        const s = (await stack.kube.get<KubeObject>(DatabaseType, namespace, name))?.["status"] as
          (Status & { id?: string }) | undefined;
        if (s?.conditions?.find((c) => c.type === "Ready")?.status !== "True" || s.id === undefined)
          throw new Error(`${namespace}/${name} not ready`);
        return s.id;
      },
      { what: `${namespace}/${name} Ready`, timeoutMs: 60_000 },
    );
  const backupStatus = async (name: string) =>
    (await stack.kube.get<KubeObject>(DatabaseBackupType, ns("b"), name))?.["status"] as Status | undefined;
  /** Waits until the operator has reported on B's DatabaseBackup `name` as `check` expects, then returns the status. */
  const reported = (name: string, check: (s: Status | undefined) => boolean) =>
    eventually(
      async () => {
        const s = await backupStatus(name);
        if (!check(s)) throw new Error(`${name}: ${JSON.stringify(s)}`);
        return s!;
      },
      { what: `${name} reported`, timeoutMs: 30_000 },
    );
  const synced = (s: Status | undefined) => s?.conditions?.find((c) => c.type === "Synced");
  const backupB = (name: string, spec: object) => ({
    apiVersion: "mds.dev/v1alpha1",
    kind: "DatabaseBackup",
    metadata: { name, namespace: ns("b") },
    spec,
  });

  beforeAll(async () => {
    stack = await startStack({ api: "service", namespaces: ["b"] });
    tokenA = stack.service.token;
    await stack.kubectl(
      ["create", "-f", "-"],
      JSON.stringify({
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name: "mds-credentials", namespace: ns("b") },
        stringData: { token: await stack.service.createToken("backup-team-b") },
      }),
    );
    operator = await stack.startOperator();
    const teamObjects = (team: "a" | "b") => [
      {
        apiVersion: "mds.dev/v1alpha1",
        kind: "Project",
        metadata: { name: "app", namespace: ns(team) },
        spec: { region: "us-east-1" },
      },
      {
        apiVersion: "mds.dev/v1alpha1",
        kind: "Database",
        metadata: { name: "orders", namespace: ns(team) },
        spec: { projectRef: { name: "app" } },
      },
    ];
    await stack.kubectl(["apply", "-f", "-"], manifests(...teamObjects("a"), ...teamObjects("b")));
    dbA = await readyId(ns("a"), "orders");
    dbB = await readyId(ns("b"), "orders");
    const taken = await fetch(`${stack.service.url}/v1/databases/${dbA}/backups`, {
      method: "POST",
      headers: { authorization: `Bearer ${tokenA}`, "content-type": "application/json" },
      body: "{}",
    });
    expect(taken.status).toBe(201);
    backupOfA = ((await taken.json()) as { data: { id: string } }).data.id;
  }, 180_000);

  afterAll(async () => {
    const leaks = stack === undefined ? "" : await stack.leaks();
    await stack?.stop();
    expect(leaks).toBe("");
  });

  it("by databaseId without a token: refused by the CRD, nothing stored", async () => {
    const err = await stack
      .kubectl(["apply", "-f", "-"], manifests(backupB("by-id-no-token", { databaseId: dbA })))
      .then(
        () => undefined,
        (e: unknown) => e as Error,
      );
    expect(String(err)).toMatch(/a backup by databaseId needs credentials.secretRef/);
    expect(await stack.kube.get(DatabaseBackupType, ns("b"), "by-id-no-token")).toBeUndefined();
  });

  it("by databaseId with B's own token: the service does not show B that database; no backup", async () => {
    const before = await backupsOfA();
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests(backupB("by-id", { databaseId: dbA, credentials: { secretRef: { name: "mds-credentials" } } })),
    );
    const s = await reported("by-id", (x) => synced(x)?.status === "False");
    expect(synced(s)?.message).toMatch(/not found/i);
    expect(s.backupId).toBeUndefined();
    expect(await backupsOfA()).toEqual(before);
  });

  it("a databaseRef into A's namespace: there is none (a ref has only a name), B's own namespace is looked in", async () => {
    const before = await backupsOfA();
    const applied = await stack
      .kubectl(
        ["apply", "-f", "-"],
        manifests(backupB("cross-ref", { databaseRef: { name: "nothing-here", namespace: ns("a") } })),
      )
      .then(
        () => "stored",
        (e: unknown) => String(e),
      );
    if (applied === "stored") {
      const s = await reported("cross-ref", (x) => synced(x)?.reason === "DatabaseNotReady");
      expect(synced(s)?.message).toContain(`database "nothing-here" not found`);
    } else {
      expect(applied).toMatch(/unknown field|namespace/);
    }
    expect(await backupsOfA()).toEqual(before);
  });

  it("a Database of B's whose id annotation, spec.externalId or forged status.id names A's database: no backup", async () => {
    const before = await backupsOfA();
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests(
        {
          apiVersion: "mds.dev/v1alpha1",
          kind: "Database",
          // A project that never exists: the Database's own loop never creates or accepts anything.
          metadata: { name: "annotated", namespace: ns("b"), annotations: { [externalIdAnnotation]: dbA } },
          spec: { projectRef: { name: "never" } },
        },
        {
          apiVersion: "mds.dev/v1alpha1",
          kind: "Database",
          metadata: { name: "adopting", namespace: ns("b") },
          spec: { projectRef: { name: "app" }, externalId: dbA },
        },
        {
          apiVersion: "mds.dev/v1alpha1",
          kind: "Database",
          metadata: { name: "forged", namespace: ns("b") },
          spec: { projectRef: { name: "never" } },
        },
      ),
    );
    await stack.kubectl([
      "patch",
      "database",
      "forged",
      "-n",
      ns("b"),
      "--subresource=status",
      "--type=merge",
      "-p",
      JSON.stringify({ status: { id: dbA } }),
    ]);
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests(
        backupB("via-annotation", { databaseRef: { name: "annotated" } }),
        backupB("via-adoption", { databaseRef: { name: "adopting" } }),
        backupB("via-forged-status", { databaseRef: { name: "forged" } }),
      ),
    );
    for (const name of ["via-annotation", "via-adoption", "via-forged-status"]) {
      const s = await reported(name, (x) => synced(x)?.status === "False");
      expect({ name, backupId: s.backupId, phase: s.phase }).toEqual({ name, backupId: undefined, phase: s.phase });
      expect(s.phase).not.toBe("Succeeded");
    }
    expect(await backupsOfA()).toEqual(before);
  });

  it("a DatabaseBackup status forged to name A's database or A's backup is not acted on nor reported as B's", async () => {
    const before = await backupsOfA();
    // Written while no operator runs, so the forged status is the first thing the operator sees.
    await operator?.stop();
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests(
        backupB("forged-target", { databaseRef: { name: "orders" } }),
        backupB("forged-backup", { databaseRef: { name: "orders" } }),
      ),
    );
    const uidOf = async (name: string) =>
      (await stack.kube.get<KubeObject>(DatabaseBackupType, ns("b"), name))!.metadata.uid!;
    const forge = async (name: string, status: object) =>
      stack.kubectl([
        "patch",
        "databasebackup",
        name,
        "-n",
        ns("b"),
        "--subresource=status",
        "--type=merge",
        "-p",
        JSON.stringify({ status }),
      ]);
    const requestedAt = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    await forge("forged-target", {
      phase: "Running",
      databaseId: dbA,
      idempotencyKey: await uidOf("forged-target"),
      requestedAt,
    });
    await forge("forged-backup", {
      phase: "Running",
      databaseId: dbB,
      idempotencyKey: await uidOf("forged-backup"),
      requestedAt,
      backupId: backupOfA,
    });
    operator = await stack.startOperator();
    const target = await reported("forged-target", (x) => synced(x)?.reason === "OutcomeUnknown");
    expect(synced(target)?.message).toContain(`spec resolves to database "${dbB}"`);
    const followed = await reported("forged-backup", (x) => synced(x)?.reason === "RemoteNotFound");
    expect(followed.phase).toBe("Running");
    expect(followed.sizeBytes).toBeUndefined();
    expect(await backupsOfA()).toEqual(before);
  });
});
