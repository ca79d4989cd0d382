// The Argo CD health checks, run by a real Lua 5.1 interpreter against sample objects whose status is valid
// against the resource schemas, so the samples are what the operator can actually write.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { DatabaseStatus } from "../../src/resources/database/schema.ts";
import { ProjectStatus } from "../../src/resources/project/schema.ts";
import { DatabaseRestoreStatus, RestorePhase } from "../../src/resources/database-restore/schema.ts";
import { BackupPhase, DatabaseBackupStatus } from "../../src/resources/database-backup/schema.ts";
import { apiVersion } from "../../src/resources/group.ts";
import { crdDefinitions } from "../../src/resources/crd-files.ts";
import { argocdCmPath, customizationsDir, readHealthScripts, registeredHealthScripts, renderArgocdCm } from "./argocd-cm.ts";
import { requireLua, runHealthScript } from "./lua.ts";
import { setCondition, type Condition } from "../../src/operator/conditions.ts";
import { conditionReasons, stallingReasons } from "../../src/resources/index.ts";
import { withProgress } from "../../src/operator/progress.ts";
import { argoAgrees, kstatusOf } from "../support/kstatus.ts";
import { parse } from "yaml";

const scriptOf = (kind: string) => join(customizationsDir, "mds.dev", kind, "health.lua");
const T = "2026-01-02T03:04:05Z";

type Reason = string;
const reasonNames = conditionReasons().map((r) => r.reason);
interface ConditionInput {
  status: "True" | "False" | "Unknown";
  reason: Reason;
  message?: string;
  observedGeneration?: number;
}

function condition(type: "Ready" | "Synced" | "Reconciling" | "Stalled", c: ConditionInput) {
  return { type, status: c.status, reason: c.reason, message: c.message ?? "", lastTransitionTime: T, observedGeneration: c.observedGeneration ?? 3 };
}

// A Database at generation 3 with the given status; the status is checked against the real schema.
function database(status: Record<string, unknown> | undefined, metadata: Record<string, unknown> = {}) {
  if (status !== undefined) DatabaseStatus.parse(status);
  return { apiVersion, kind: "Database", metadata: { name: "orders", namespace: "shop", generation: 3, ...metadata }, spec: { projectRef: { name: "shop" } }, status };
}
function project(status: Record<string, unknown> | undefined) {
  if (status !== undefined) ProjectStatus.parse(status);
  return { apiVersion, kind: "Project", metadata: { name: "shop", namespace: "shop", generation: 3 }, spec: { displayName: "shop", region: "us-east-1" }, status };
}
function restore(status: Record<string, unknown> | undefined) {
  if (status !== undefined) DatabaseRestoreStatus.parse(status);
  return { apiVersion, kind: "DatabaseRestore", metadata: { name: "rollback", namespace: "shop", generation: 1 }, spec: {}, status };
}
const conditions = (ready: ConditionInput, synced: ConditionInput = { status: "True", reason: "ReconcileSuccess" }) => [
  condition("Ready", ready),
  condition("Synced", synced),
];

// Reasons after which nothing changes without a person (the operator sets Stalled for them); everything else is worth waiting for.
const degradedReasons = stallingReasons() as Reason[];

beforeAll(() => {
  requireLua();
});

describe("Database and Project health (Argo CD, Lua 5.1)", () => {
  const health = (obj: unknown, kind = "Database") => runHealthScript(scriptOf(kind), obj);

  it("is Progressing before any status exists", () => {
    expect(health(database(undefined))).toEqual({ status: "Progressing", message: "Waiting for the operator to report status" });
    expect(health(database({})).status).toBe("Progressing");
    expect(health(project(undefined), "Project").status).toBe("Progressing");
  });

  it("is Healthy when Ready is True for the current generation", () => {
    const obj = database({ remoteStatus: "ready", observedGeneration: 3, conditions: conditions({ status: "True", reason: "Available", message: "database ready" }) });
    expect(health(obj)).toEqual({ status: "Healthy", message: "database ready" });
  });

  it("stays Healthy when Ready is current but the last resync failed transiently", () => {
    const obj = database({ remoteStatus: "ready", conditions: conditions({ status: "True", reason: "Available" }, { status: "False", reason: "ApiUnavailable", message: "service unreachable" }) });
    expect(health(obj).status).toBe("Healthy");
  });

  it("is Progressing when Ready is True for an older generation (a spec change not yet observed)", () => {
    const obj = database({ conditions: conditions({ status: "True", reason: "Available", observedGeneration: 2 }, { status: "True", reason: "ReconcileSuccess", observedGeneration: 2 }) });
    expect(health(obj)).toEqual({ status: "Progressing", message: "Waiting for the operator to observe generation 3" });
  });

  it("falls back to status.observedGeneration when a condition has none", () => {
    const ready = { type: "Ready", status: "True", reason: "Available", message: "ok", lastTransitionTime: T };
    expect(health(database({ observedGeneration: 3, conditions: [ready] })).status).toBe("Healthy");
    expect(health(database({ observedGeneration: 2, conditions: [ready] })).status).toBe("Progressing");
  });

  it("is Progressing while provisioning, creating, restoring and waiting for its project", () => {
    for (const [remoteStatus, reason] of [["provisioning", "Provisioning"], [undefined, "Creating"], ["recovering", "Restoring"], [undefined, "ProjectNotReady"]] as const) {
      const status = { ...(remoteStatus ? { remoteStatus } : {}), conditions: conditions({ status: "False", reason, message: `now ${reason}` }) };
      expect(health(database(status))).toEqual({ status: "Progressing", message: `now ${reason}` });
    }
  });

  it("is Progressing during an API outage, and says why", () => {
    const obj = database({ conditions: conditions({ status: "False", reason: "Provisioning", message: "provisioning" }, { status: "False", reason: "ApiUnavailable", message: "connect ECONNREFUSED" }) });
    expect(health(obj)).toEqual({ status: "Progressing", message: "provisioning (ApiUnavailable: connect ECONNREFUSED)" });
  });

  it("is Degraded when the service reports the database failed", () => {
    const obj = database({ remoteStatus: "failure", conditions: conditions({ status: "False", reason: "RemoteFailure", message: "provisioning failed" }) });
    expect(health(obj)).toEqual({ status: "Degraded", message: "provisioning failed" });
    expect(health(database({ remoteStatus: "failure" })).status).toBe("Degraded");
  });

  it("is Degraded when a Project's default database failed", () => {
    const obj = project({ defaultDatabase: { id: "db_abcdefgh1", name: "default", status: "failure" } });
    expect(health(obj, "Project").status).toBe("Degraded");
  });

  it("is Degraded on an invalid spec for the current generation, Progressing once the spec changed", () => {
    const invalid = (observedGeneration: number) =>
      database({ conditions: conditions({ status: "False", reason: "Creating", observedGeneration }, { status: "False", reason: "InvalidSpec", message: 'unknown region "mars"', observedGeneration }) });
    expect(health(invalid(3))).toEqual({ status: "Degraded", message: 'InvalidSpec: unknown region "mars"' });
    expect(health(invalid(2)).status).toBe("Progressing");
  });

  it("classifies every condition reason the operator can write", () => {
    for (const reason of reasonNames) {
      const obj = database({ conditions: conditions({ status: "False", reason, message: "m" }, { status: "False", reason, message: "m" }) });
      const expected = degradedReasons.includes(reason) ? "Degraded" : reason === "ReconcilePaused" ? "Suspended" : "Progressing";
      expect({ reason, status: health(obj).status }).toEqual({ reason, status: expected });
    }
  });

  it("names only reasons that the registry declares", async () => {
    const text = await readFile(scriptOf("Database"), "utf8");
    const block = /local terminal = \{([^}]*)\}/.exec(text)?.[1] ?? "";
    const named = [...block.matchAll(/(\w+) = true/g)].map((m) => m[1]);
    expect(named.sort()).toEqual([...degradedReasons].sort());
    for (const reason of named) expect(reasonNames).toContain(reason);
  });

  it("is Degraded with the Stalled message when Stalled is True, before every other rule", () => {
    const stalled = (reason: Reason, message: string, observedGeneration = 3) => condition("Stalled", { status: "True", reason, message, observedGeneration });
    const refused = "spec.externalId db_abcdefgh1 is not visible to the credentials shop/mds-credentials";
    // Stalled wins over a Ready=True, a pause and a deletion in progress.
    const obj = database({ remoteStatus: "ready", conditions: [...conditions({ status: "True", reason: "Available", message: "ok" }, { status: "False", reason: "AdoptionRefused", message: refused }), stalled("AdoptionRefused", refused)] });
    expect(health(obj)).toEqual({ status: "Degraded", message: `AdoptionRefused: ${refused}` });
    const paused = database({ conditions: [...conditions({ status: "False", reason: "Creating" }, { status: "True", reason: "ReconcilePaused" }), stalled("InvalidSpec", "bad poll interval")] });
    expect(health(paused)).toEqual({ status: "Degraded", message: "InvalidSpec: bad poll interval" });
    const deleting = database({ conditions: [...conditions({ status: "False", reason: "Deleting" }), stalled("InvalidSpec", "m")] }, { deletionTimestamp: T });
    expect(health(deleting).status).toBe("Degraded");
    for (const kind of ["Project", "Connection", "BackupSchedule"]) {
      const p = project({ conditions: [...conditions({ status: "False", reason: "Creating" }), stalled("ReferenceNotAllowed", "not allowed")] });
      expect(health({ ...p, kind }, kind)).toEqual({ status: "Degraded", message: "ReferenceNotAllowed: not allowed" });
    }
    // A Stalled of an older generation does not count: the operator has not looked at the new spec yet.
    const stale = database({ conditions: [...conditions({ status: "True", reason: "Available", message: "ok" }), stalled("InvalidSpec", "m", 2)] });
    expect(health(stale).status).toBe("Healthy");
  });

  it("is Healthy when Stalled is False (recovered) and Ready is True", () => {
    const obj = database({
      remoteStatus: "ready",
      conditions: [...conditions({ status: "True", reason: "Available", message: "database ready" }), condition("Stalled", { status: "False", reason: "ReconcileSuccess" })],
    });
    expect(health(obj)).toEqual({ status: "Healthy", message: "database ready" });
  });

  it("is Suspended while paused", () => {
    const obj = database({ conditions: conditions({ status: "False", reason: "Provisioning" }, { status: "True", reason: "ReconcilePaused", message: "paused by annotation" }) });
    expect(health(obj)).toEqual({ status: "Suspended", message: "paused by annotation" });
  });

  it("is Progressing while being deleted", () => {
    const obj = database({ conditions: conditions({ status: "False", reason: "Deleting" }) }, { deletionTimestamp: T });
    expect(health(obj)).toEqual({ status: "Progressing", message: "Being deleted" });
  });

  it("survives text Lua would choke on (quotes, backslashes, non-ASCII)", () => {
    const message = 'name "ördérs" \\ is\ttaken\n— retry';
    const obj = database({ conditions: conditions({ status: "True", reason: "Available", message }) });
    expect(health(obj)).toEqual({ status: "Healthy", message });
  });

  it("is Progressing while Reconciling is True, even with Ready True (a rotation)", () => {
    const rotating = database({
      remoteStatus: "ready",
      observedGeneration: 3,
      conditions: [...conditions({ status: "True", reason: "Available" }), condition("Reconciling", { status: "True", reason: "Rotating", message: "rotating" })],
    });
    expect(health(rotating)).toEqual({ status: "Progressing", message: "rotating" });
  });

  it("uses one script for Project, Database and Connection, so they cannot drift", async () => {
    expect(await readFile(scriptOf("Project"), "utf8")).toBe(await readFile(scriptOf("Database"), "utf8"));
    expect(await readFile(scriptOf("Connection"), "utf8")).toBe(await readFile(scriptOf("Database"), "utf8"));
    expect(await readFile(scriptOf("BackupSchedule"), "utf8")).toBe(await readFile(scriptOf("Database"), "utf8"));
    const obj = project({ conditions: conditions({ status: "True", reason: "Available", message: "ok" }) });
    expect(health(obj, "Project")).toEqual({ status: "Healthy", message: "ok" });
  });
});

describe("DatabaseRestore health (Argo CD, Lua 5.1)", () => {
  const health = (obj: unknown) => runHealthScript(scriptOf("DatabaseRestore"), obj);

  it("is Progressing before any status, while Pending and while Running", () => {
    expect(health(restore(undefined)).status).toBe("Progressing");
    expect(health(restore({ phase: "Pending" }))).toEqual({ status: "Progressing", message: "Restore pending" });
    expect(health(restore({ phase: "Running", requestedAt: T, message: "restoring bkp_abcdefgh1" }))).toEqual({ status: "Progressing", message: "restoring bkp_abcdefgh1" });
  });

  it("is Healthy when Succeeded or Skipped", () => {
    expect(health(restore({ phase: "Succeeded", completedAt: T }))).toEqual({ status: "Healthy", message: "Restore succeeded" });
    const skipped = health(restore({ phase: "Skipped", reason: "AlreadyApplied", message: "key shop/rollback was applied on 2026-01-01" }));
    expect(skipped).toEqual({ status: "Healthy", message: "AlreadyApplied: key shop/rollback was applied on 2026-01-01" });
  });

  it("is Degraded when Failed, including an unknowable outcome", () => {
    expect(health(restore({ phase: "Failed", message: "backup not found" }))).toEqual({ status: "Degraded", message: "backup not found" });
    const unknown = health(restore({ phase: "Failed", reason: "OutcomeUnknown", message: "not repeated automatically" }));
    expect(unknown).toEqual({ status: "Degraded", message: "OutcomeUnknown: not repeated automatically" });
  });

  it("is Degraded on an invalid spec before any phase", () => {
    const obj = restore({ conditions: [condition("Synced", { status: "False", reason: "InvalidSpec", message: "target and source are both missing", observedGeneration: 1 })] });
    expect(health(obj)).toEqual({ status: "Degraded", message: "InvalidSpec: target and source are both missing" });
  });

  it("is Degraded with the Stalled message when Stalled is True, Healthy when it is False and the phase Succeeded", () => {
    const stalled = restore({ phase: "Pending", conditions: [condition("Stalled", { status: "True", reason: "InvalidSpec", message: "databaseId needs spec.credentials", observedGeneration: 1 })] });
    expect(health(stalled)).toEqual({ status: "Degraded", message: "InvalidSpec: databaseId needs spec.credentials" });
    const recovered = restore({ phase: "Succeeded", completedAt: T, conditions: [condition("Stalled", { status: "False", reason: "ReconcileSuccess", observedGeneration: 1 })] });
    expect(health(recovered)).toEqual({ status: "Healthy", message: "Restore succeeded" });
  });

  it("covers every phase of the schema", () => {
    const expected: Record<RestorePhase, string> = { Pending: "Progressing", Running: "Progressing", Succeeded: "Healthy", Failed: "Degraded", Skipped: "Healthy" };
    for (const phase of RestorePhase.options) expect({ phase, status: health(restore({ phase })).status }).toEqual({ phase, status: expected[phase] });
  });
});

// The statuses the operator writes (Ready and Synced as a reconcile sets them, Reconciling and Stalled derived by
// src/operator/progress.ts exactly as every status write does), for every reason in either condition, while deleting,
// rotating and paused: kstatus (test/support/kstatus.ts) and the Argo CD health scripts must say the same.
describe("Argo CD health agrees with kstatus on the operator's statuses", () => {
  const now = new Date(T);
  const written = (ready: ConditionInput, synced: ConditionInput, flags: { deleting?: boolean; rotating?: boolean; terminal?: boolean }) => {
    let list: Condition[] = [];
    for (const [type, c] of [["Ready", ready], ["Synced", synced]] as const) list = setCondition(list, { type, status: c.status, reason: c.reason, message: c.message ?? "m", observedGeneration: 3 }, now);
    const terminal = flags.terminal ? { reason: synced.reason, message: "m" } : undefined;
    return withProgress(list, { generation: 3, deleting: flags.deleting ?? false, rotating: flags.rotating ?? false, terminal, stalling: new Set(stallingReasons()) }, now);
  };
  const reasons = reasonNames;
  const cases: { name: string; ready: ConditionInput; synced: ConditionInput; flags: { deleting?: boolean; rotating?: boolean; terminal?: boolean } }[] = [];
  for (const reason of reasons) {
    for (const flags of [{}, { deleting: true }, { rotating: true }, { terminal: true }]) {
      cases.push({ name: `Ready=False ${reason}`, ready: { status: "False", reason }, synced: { status: "True", reason: "ReconcileSuccess" }, flags });
      cases.push({ name: `Synced=False ${reason}, never ready`, ready: { status: "False", reason: "Creating" }, synced: { status: "False", reason }, flags });
      cases.push({ name: `Synced=False ${reason}, ready`, ready: { status: "True", reason: "Available" }, synced: { status: "False", reason }, flags });
      cases.push({ name: `Synced=True ${reason}, ready`, ready: { status: "True", reason: "Available" }, synced: { status: "True", reason }, flags });
    }
  }

  it(`Database, Project and Connection: ${cases.length} statuses`, () => {
    const disagreements: string[] = [];
    for (const c of cases) {
      const status = { remoteStatus: "ready", observedGeneration: 3, conditions: written(c.ready, c.synced, c.flags) };
      const obj = database(status, c.flags.deleting ? { deletionTimestamp: T } : {});
      const k = kstatusOf(obj).status;
      const argo = runHealthScript(scriptOf("Database"), obj).status;
      if (!argoAgrees(k, argo)) disagreements.push(`${c.name} ${JSON.stringify(c.flags)}: kstatus ${k}, Argo CD ${argo}`);
    }
    expect(disagreements).toEqual([]);
  });

  it("DatabaseRestore: every phase as the restore controller writes it", () => {
    const byPhase: Record<RestorePhase, ConditionInput> = {
      Pending: { status: "False", reason: "DatabaseNotReady" },
      Running: { status: "False", reason: "Restoring" },
      Succeeded: { status: "True", reason: "Available" },
      Skipped: { status: "True", reason: "Available" },
      Failed: { status: "False", reason: "RemoteFailure" },
    };
    const expected: Record<RestorePhase, string> = { Pending: "InProgress", Running: "InProgress", Succeeded: "Current", Skipped: "Current", Failed: "Failed" };
    for (const phase of RestorePhase.options) {
      const obj = restore({ phase, observedGeneration: 1, conditions: written(byPhase[phase], { status: "True", reason: "ReconcileSuccess" }, {}).map((c) => ({ ...c, observedGeneration: 1 })) });
      const k = kstatusOf(obj).status;
      const argo = runHealthScript(scriptOf("DatabaseRestore"), obj).status;
      expect({ phase, kstatus: k, agree: argoAgrees(k, argo) }).toEqual({ phase, kstatus: expected[phase], agree: true });
    }
    const outcomeUnknown = restore({ phase: "Failed", reason: "OutcomeUnknown", observedGeneration: 1, conditions: written({ status: "False", reason: "OutcomeUnknown" }, { status: "True", reason: "ReconcileSuccess" }, {}) });
    expect(kstatusOf(outcomeUnknown).status).toBe("Failed");
    expect(runHealthScript(scriptOf("DatabaseRestore"), outcomeUnknown).status).toBe("Degraded");
  });

  it("DatabaseBackup: every phase as the backup controller writes it, NotSupported and OutcomeUnknown Degraded", () => {
    const backup = (status: Record<string, unknown>) => {
      DatabaseBackupStatus.parse(status);
      return { apiVersion, kind: "DatabaseBackup", metadata: { name: "nightly", namespace: "shop", generation: 1 }, spec: {}, status };
    };
    const byPhase: Record<BackupPhase, ConditionInput> = {
      Pending: { status: "False", reason: "DatabaseNotReady" },
      Running: { status: "False", reason: "BackingUp" },
      Succeeded: { status: "True", reason: "Available" },
      Failed: { status: "False", reason: "RemoteFailure" },
    };
    const expected: Record<BackupPhase, string> = { Pending: "InProgress", Running: "InProgress", Succeeded: "Current", Failed: "Failed" };
    for (const phase of BackupPhase.options) {
      const obj = backup({ phase, observedGeneration: 1, conditions: written(byPhase[phase], { status: "True", reason: "ReconcileSuccess" }, {}).map((c) => ({ ...c, observedGeneration: 1 })) });
      const k = kstatusOf(obj).status;
      const argo = runHealthScript(scriptOf("DatabaseBackup"), obj).status;
      expect({ phase, kstatus: k, agree: argoAgrees(k, argo) }).toEqual({ phase, kstatus: expected[phase], agree: true });
    }
    for (const reason of ["NotSupported", "OutcomeUnknown"] as const) {
      const obj = backup({ phase: "Failed", reason, observedGeneration: 1, conditions: written({ status: "False", reason }, { status: "True", reason: "ReconcileSuccess" }, {}) });
      expect(kstatusOf(obj).status).toBe("Failed");
      const argo = runHealthScript(scriptOf("DatabaseBackup"), obj);
      expect(argo.status).toBe("Degraded");
      expect(argo.message).toContain(reason);
    }
  });

  it("before any operator has looked (the CRDs' default status): InProgress and Progressing", async () => {
    const { awaitingOperatorStatus } = await import("../../src/resources/conditions.ts");
    for (const obj of [database(awaitingOperatorStatus), restore(awaitingOperatorStatus)]) {
      expect(kstatusOf(obj).status).toBe("InProgress");
      expect(runHealthScript(scriptOf(obj.kind), obj).status).toBe("Progressing");
    }
  });
});

describe("Argo CD installation files", () => {
  it("has one health.lua per kind, laid out as Argo CD's resource_customizations/<group>/<Kind>/health.lua", async () => {
    const scripts = await readHealthScripts();
    expect([...scripts.keys()].sort()).toEqual(crdDefinitions.map((k) => `mds.dev/${k.kind}`).sort());
  });

  it("holds exactly the script each kind's module names (regenerate with `npm run argocd-cm`)", async () => {
    expect(await readHealthScripts()).toEqual(await registeredHealthScripts());
  });

  it("argocd-cm.yaml embeds exactly the tested scripts (regenerate with `npm run argocd-cm`)", async () => {
    expect(await readFile(argocdCmPath, "utf8")).toBe(await renderArgocdCm());
    const cm = parse(await readFile(argocdCmPath, "utf8")) as { data: Record<string, string> };
    for (const [groupKind, script] of await readHealthScripts()) {
      expect(cm.data[`resource.customizations.health.${groupKind.replace("/", "_")}`]).toBe(script);
    }
  });
});
