import { expect } from "vitest";
import type { KubeObject, ResourceType } from "../../src/kube/types.ts";
import { SecretType, type Secret } from "../../src/kube/types.ts";
import { BackupScheduleType } from "../../src/resources/backup-schedule/schema.ts";
import { DatabaseBackupType } from "../../src/resources/database-backup/schema.ts";
import { ConnectionType, DatabaseRestoreType, DatabaseType, ProjectType } from "../../src/resources/types.ts";
import { eventually, manifests, type Counterpart, type Stack } from "./helpers.ts";

// A fleet of every kind in the states an upgrade, a rollback or a newer version's status must carry through: a
// Project made here and one adopted, a protected Database, an expiring one, one adopted and one ObserveOnly (both made
// at the service first), a granted Connection, a restore done, a backup taken and a backup schedule. The newer-version and upgrade tests apply it,
// take a snapshot of everything that must not change, and compare.

type Cond = { type: string; status: string; reason: string };
export type Obj = KubeObject & { status?: Record<string, unknown> & { conditions?: Cond[] } };

/** Every object of the fleet, by kind. */
export const fleet: { type: ResourceType; name: string; managed: boolean }[] = [
  { type: ProjectType, name: "shop", managed: true },
  { type: ProjectType, name: "legacy", managed: true },
  { type: DatabaseType, name: "orders", managed: true },
  { type: DatabaseType, name: "adopted", managed: true },
  { type: DatabaseType, name: "observed", managed: true },
  { type: DatabaseType, name: "preview", managed: true },
  { type: ConnectionType, name: "app", managed: true },
  { type: DatabaseBackupType, name: "nightly", managed: false },
  { type: BackupScheduleType, name: "hourly", managed: false },
  { type: DatabaseRestoreType, name: "rollback", managed: false },
];

/** Backups exist only where the service takes them on request: the emulator's (the public API's) say NotSupported. */
const backupKind = (t: ResourceType) => t === DatabaseBackupType || t === BackupScheduleType;

function serviceApi(stack: Stack) {
  return async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${stack.service.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${stack.service.token}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
    return (await res.json()) as { data: unknown };
  };
}

const condition = (obj: Obj | undefined, type: string) => obj?.status?.conditions?.find((c) => c.type === type);

/** Where each object settles: Ready=True, or (backup kinds on the emulator) Stalled NotSupported. */
export function settled(counterpart: Counterpart, type: ResourceType, obj: Obj | undefined): boolean {
  if (counterpart === "emulator" && backupKind(type)) return condition(obj, "Stalled")?.status === "True";
  return condition(obj, "Ready")?.status === "True";
}

export async function getObj(stack: Stack, type: ResourceType, name: string): Promise<Obj | undefined> {
  return stack.kube.get<Obj>(type, stack.namespace, name);
}

async function waitSettled(stack: Stack, counterpart: Counterpart, what: string): Promise<void> {
  for (const { type, name } of fleet)
    await eventually(
      async () => {
        const obj = await getObj(stack, type, name);
        if (!settled(counterpart, type, obj)) throw new Error(`${type.kind} ${name}: ${JSON.stringify(obj?.status)}`);
      },
      { what: `${type.kind} ${name} settled (${what})`, timeoutMs: 90_000 },
    );
}

/** Applies the fleet and waits until each object has settled; an operator must be running. */
export async function applyFleet(stack: Stack, counterpart: Counterpart): Promise<void> {
  const api = serviceApi(stack);
  const ns = stack.namespace;
  const legacy = (await api("POST", "/v1/projects", { name: "legacy", region: "us-east-1", createDatabase: false }))
    .data as { id: string };
  const made = async (name: string) =>
    ((await api("POST", "/v1/databases", { projectId: legacy.id, name, region: "us-east-1" })).data as { id: string })
      .id;
  const [adoptedId, observedId] = [await made("adopted"), await made("observed")];
  const meta = (name: string) => ({ name, namespace: ns });
  const v = "mds.dev/v1alpha1";
  await stack.kubectl(
    ["apply", "-f", "-"],
    manifests(
      { apiVersion: v, kind: "Project", metadata: meta("shop"), spec: { region: "us-east-1" } },
      {
        apiVersion: v,
        kind: "Project",
        metadata: meta("legacy"),
        spec: { region: "us-east-1", externalId: legacy.id },
      },
      {
        apiVersion: v,
        kind: "Database",
        metadata: meta("orders"),
        spec: {
          projectRef: { name: "shop" },
          deletionProtection: true,
          connectionPolicy: { allowedNamespaces: [ns] },
        },
      },
      {
        apiVersion: v,
        kind: "Database",
        metadata: meta("adopted"),
        spec: { projectId: legacy.id, externalId: adoptedId },
      },
      {
        apiVersion: v,
        kind: "Database",
        metadata: meta("observed"),
        spec: { projectId: legacy.id, externalId: observedId, managementPolicy: "ObserveOnly" },
      },
      {
        apiVersion: v,
        kind: "Database",
        metadata: meta("preview"),
        // Expiring: its expiresAt is computed once, at creation, and must survive every roll unchanged.
        spec: { projectRef: { name: "shop" }, expireAfter: "720h", deletionPolicy: "Delete" },
      },
      { apiVersion: v, kind: "Connection", metadata: meta("app"), spec: { databaseRef: { name: "orders" } } },
      { apiVersion: v, kind: "DatabaseBackup", metadata: meta("nightly"), spec: { databaseRef: { name: "orders" } } },
      {
        apiVersion: v,
        kind: "BackupSchedule",
        metadata: meta("hourly"),
        // A slot far away: no backup is due while the test runs, so none may appear.
        spec: { databaseRef: { name: "orders" }, schedule: "0 3 1 1 *", keep: 2 },
      },
    ),
  );
  for (const name of ["orders", "app"])
    await eventually(
      async () =>
        expect(
          settled(
            counterpart,
            name === "app" ? ConnectionType : DatabaseType,
            await getObj(stack, name === "app" ? ConnectionType : DatabaseType, name),
          ),
        ).toBe(true),
      { what: `${name} Ready`, timeoutMs: 90_000 },
    );
  // A backup taken at the service (on both counterparts: the restore needs one), then a restore of it, done.
  const ordersId = (await getObj(stack, DatabaseType, "orders"))?.status?.["id"] as string;
  if (counterpart === "emulator") await api("POST", `/v1/databases/${ordersId}/backups`);
  await eventually(
    async () => {
      const list = (await api("GET", `/v1/databases/${ordersId}/backups`)).data as { status: string }[];
      expect(list.some((b) => b.status === "completed")).toBe(true);
    },
    { what: "a completed backup of orders", timeoutMs: 90_000 },
  );
  await stack.kubectl(
    ["apply", "-f", "-"],
    manifests({
      apiVersion: v,
      kind: "DatabaseRestore",
      metadata: meta("rollback"),
      spec: { target: { databaseRef: { name: "orders" } }, source: { databaseRef: { name: "orders" }, latest: true } },
    }),
  );
  await waitSettled(stack, counterpart, "applied");
  await eventually(
    async () => expect((await getObj(stack, DatabaseRestoreType, "rollback"))?.status?.["phase"]).toBe("Succeeded"),
    { what: "the restore done" },
  );
}

export interface Snapshot {
  /** Ids of every project and database at the service, and of every backup of every database. */
  remote: { projects: string[]; databases: string[]; backups: string[] };
  /** Every Secret of the namespace: name → resourceVersion (a changed one restarts the apps that mount it). */
  secrets: Record<string, string>;
  /** Each object's status, conditions cut to type, status and reason, without the fields a reconcile may refresh. */
  status: Record<string, unknown>;
}

/** Fields a reconcile may rewrite without anything having changed for the user. */
const refreshed = new Set(["lastHandledReconcileAt", "nextScheduleTime", "observedGeneration"]);

function statusSummary(obj: Obj | undefined): unknown {
  const status = { ...obj?.status };
  for (const k of refreshed) delete status[k];
  status["conditions"] = (obj?.status?.conditions ?? [])
    .map((c) => ({ type: c.type, status: c.status, reason: c.reason }))
    .sort((a, b) => a.type.localeCompare(b.type));
  return status;
}

/**
 * `after`'s statuses comparable with `before`'s: status.latestBackup mirrors the service's newest backup at most once
 * a minute, so one taken just before `before` may show only later; one `before` had must stay.
 */
export function comparableStatus(before: Snapshot, after: Snapshot): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(after.status)) {
    const had = (before.status[key] as Record<string, unknown> | undefined)?.["latestBackup"] !== undefined;
    const { latestBackup, ...rest } = value as Record<string, unknown>;
    out[key] = had || latestBackup === undefined ? value : rest;
  }
  return out;
}

export async function snapshot(stack: Stack): Promise<Snapshot> {
  const api = serviceApi(stack);
  const ids = (r: { data: unknown }) => (r.data as { id: string }[]).map((x) => x.id).sort();
  const databases = ids(await api("GET", "/v1/databases?limit=100"));
  const backups: string[] = [];
  for (const id of databases) backups.push(...ids(await api("GET", `/v1/databases/${id}/backups`)));
  const secrets = (await stack.kube.list<Secret>(SecretType, { namespace: stack.namespace })).items;
  const status: Record<string, unknown> = {};
  for (const { type, name } of fleet) status[`${type.kind}/${name}`] = statusSummary(await getObj(stack, type, name));
  return {
    remote: { projects: ids(await api("GET", "/v1/projects?limit=100")), databases, backups: backups.sort() },
    secrets: Object.fromEntries(secrets.map((s) => [s.metadata.name, s.metadata.resourceVersion ?? ""])),
    status,
  };
}

/**
 * Warning Events of the namespace: uid → what and how often (a repeated Event raises its count). Without
 * DeletionProtectionNotEnforced: every operator start audits the cluster for the admission policy that devkube
 * (and a test cluster) lacks; it says nothing about the resources' status.
 */
export async function warnings(stack: Stack): Promise<Record<string, string>> {
  const out = await stack.kubectl(["get", "events", "--field-selector=type=Warning", "-o", "json"]);
  const items = (
    JSON.parse(out) as {
      items: {
        metadata: { uid: string };
        count?: number;
        reason: string;
        message: string;
        involvedObject: { name: string };
      }[];
    }
  ).items;
  return Object.fromEntries(
    items
      .filter((e) => e.reason !== "DeletionProtectionNotEnforced")
      .map((e) => [
        e.metadata.uid,
        `${e.involvedObject.name} ${e.reason} x${e.count ?? 1}: ${e.message.slice(0, 200)}`,
      ]),
  );
}
