import type { KubeObject } from "../../kube/types.ts";
import type { MdsApi } from "../remote/remote-api.ts";
import type { Controller, ObjectCache, ObjectGauge } from "../../operator/controller.ts";
import { latestBackupOf } from "../remote/backups.ts";
import { DatabaseType } from "./schema.ts";

// A Database's status.latestBackup: its newest completed backup as the service lists it (whoever took it: the
// provider's daily ones, a DatabaseBackup, a schedule; remote/backups.ts reads the list), and the age of that backup
// per database for Prometheus (mds_database_backup_age_seconds), so an alert can fire when a database has gone too
// long without one. Both counterparts list backups, so this works against the public API too.

// Which databases have their backups read at all (a resync of N databases must cost about N/100 calls, or 10,000 live ones overrun the rate budget):
// only a Database with a BackupSchedule or a DatabaseBackup of it in its namespace, or with spec.trackLatestBackup.
// A plain Database costs no call and has no backup-age series (an alert on it would only say "never looked").
// When: once per operator process, then when a backup of it completes or a schedule prunes (forgetLatestBackup), and
// every 12 slow polls (an hour by default) as a safety net (backups expire at the service); an opted-in Database
// every 2 slow polls (10 minutes), since the backups it watches (the provider's daily ones) appear without anything
// in Kubernetes noticing. Never more than once a minute.
function refreshIntervals(slowMs = 300_000): { tracked: number; optIn: number } {
  return { tracked: Math.max(60_000, 12 * slowMs), optIn: Math.max(60_000, 2 * slowMs) };
}

/** What backup tracking reads of a Database. */
interface TrackingRef {
  namespace: string;
  name: string;
  id: string | undefined;
  /** spec.trackLatestBackup */
  optIn: boolean;
}

const trackingRefOf = (db: KubeObject): TrackingRef => ({
  namespace: db.metadata.namespace ?? "",
  name: db.metadata.name,
  id: (db["status"] as { id?: string } | undefined)?.id,
  optIn: (db["spec"] as { trackLatestBackup?: boolean } | undefined)?.trackLatestBackup === true,
});

/** Whether a Database's backups are read, and how often: undefined when they are not (no API call). */
export function backupTracking(
  cache: (kind: string) => ObjectCache,
  slowMs?: number,
): (db: KubeObject | TrackingRef) => { refreshMs: number } | undefined {
  const every = refreshIntervals(slowMs);
  const named = new Set<string>();
  const byId = new Set<string>();
  for (const kind of ["BackupSchedule", "DatabaseBackup"]) {
    for (const o of cache(kind).list()) {
      const spec = o["spec"] as { databaseRef?: { name?: string }; databaseId?: string } | undefined;
      if (spec?.databaseRef?.name !== undefined) named.add(`${o.metadata.namespace ?? ""}/${spec.databaseRef.name}`);
      if (spec?.databaseId !== undefined) byId.add(spec.databaseId);
    }
  }
  return (db) => {
    const ref = "metadata" in db ? trackingRefOf(db) : db;
    if (ref.optIn) return { refreshMs: every.optIn };
    if (named.has(`${ref.namespace}/${ref.name}`) || (ref.id !== undefined && byId.has(ref.id)))
      return { refreshMs: every.tracked };
    return undefined;
  };
}

/** status.latestBackup as the Database's observation merges it: a field only when the list was read. */
export async function latestBackupStatus(
  api: MdsApi,
  databaseId: string,
  tracking: { refreshMs: number } | undefined,
): Promise<Record<string, unknown>> {
  // Not tracked: no call, and no value (one from when it was tracked would age into a false alarm or a stale claim).
  if (tracking === undefined) return { latestBackup: undefined };
  const latest = await latestBackupOf(api, databaseId, Date.now(), tracking.refreshMs);
  // undefined removes a value that is no longer true (every backup expired or was deleted): the status write drops it.
  return latest === "unknown" ? {} : { latestBackup: latest };
}

/**
 * What the backup-age gauge reads of a Database, kept by the operator from its events (Controller.objectGauges): only
 * a Database with a remote id has one (one not yet created has nothing to lose).
 */
interface BackupAgeView {
  id: string;
  /** Its newest completed backup's time, or its creation's (ms). */
  since: number;
  optIn: boolean;
}

function backupAgeView(db: KubeObject): BackupAgeView | undefined {
  const status = db["status"] as { id?: string; latestBackup?: { time?: string } } | undefined;
  if (status?.id === undefined) return undefined;
  const since = Date.parse(status.latestBackup?.time ?? db.metadata.creationTimestamp ?? "");
  if (Number.isNaN(since)) return undefined;
  return { id: status.id, since, optIn: trackingRefOf(db).optIn };
}

/**
 * Seconds since each tracked Database's newest completed backup, or, with none, since the Database was created: how
 * long it has been without a backup, from the views by `namespace/name`. Only those whose backups are read
 * (backupTracking): a plain Database has no series.
 */
function backupAgesOf(
  views: ReadonlyMap<string, BackupAgeView>,
  now: number,
  tracked: (db: TrackingRef) => unknown = () => true,
): { namespace: string; name: string; seconds: number }[] {
  const ages: { namespace: string; name: string; seconds: number }[] = [];
  for (const [key, view] of views) {
    const i = key.indexOf("/");
    const namespace = key.slice(0, i);
    const name = key.slice(i + 1);
    if (!tracked({ namespace, name, id: view.id, optIn: view.optIn })) continue;
    ages.push({ namespace, name, seconds: Math.max(0, (now - view.since) / 1000) });
  }
  return ages;
}

/** backupAgesOf over Database objects. */
export function backupAges(
  databases: KubeObject[],
  now: number,
  tracked: (db: TrackingRef) => unknown = () => true,
): { namespace: string; name: string; seconds: number }[] {
  const views = new Map<string, BackupAgeView>();
  for (const db of databases) {
    const view = backupAgeView(db);
    if (view !== undefined) views.set(`${db.metadata.namespace ?? ""}/${db.metadata.name}`, view);
  }
  return backupAgesOf(views, now, tracked);
}

/** One series per Database with a backup configuration: an alert must say which database has gone without a backup. */
const backupAgeGauge: ObjectGauge = {
  name: "mds_database_backup_age_seconds",
  help: "Seconds since the newest completed backup of a Database (status.latestBackup), or since its creation when it has none. One series per Database with a backup configuration: an alert must name the database whose backups stopped. A Database has one when it has a remote id and a BackupSchedule, a DatabaseBackup or spec.trackLatestBackup.",
  labels: ["database_namespace", "database"],
};

/** How long each Database has gone without a backup, for the alert (deploy/components/monitoring). */
export const backupAgeGauges: NonNullable<Controller["objectGauges"]> = {
  gauges: [backupAgeGauge],
  of: DatabaseType.kind,
  view: backupAgeView,
  samples: (views, cache, now) =>
    backupAgesOf(views as ReadonlyMap<string, BackupAgeView>, now, backupTracking(cache)).map((a) => ({
      metric: backupAgeGauge.name,
      namespace: a.namespace,
      name: a.name,
      value: a.seconds,
    })),
};
