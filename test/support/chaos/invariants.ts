import pg from "pg";
import { formatFindings, scanFiles, scanKubernetes, type PlantedSecret } from "../secret-scan.ts";
import { secretKeys } from "../../../src/resources/index.ts";
import { isReady, type KubeObject, type KubeObjects } from "../kube-objects.ts";

// What must hold after every chaos iteration, checked from the outside: from the service's own
// records (its control database and its API), from Kubernetes as a user sees it, and from the logs.

export const mdsApiVersion = "mds.dev/v1alpha1";

export type InvariantName =
  | "one-remote-per-resource"
  | "ready-secret-connects"
  | "retired-revoked"
  | "restore-at-most-once"
  | "no-stuck-finalizer"
  | "no-secret-leak"
  | "converged";

export interface Violation {
  invariant: InvariantName;
  detail: string;
}

export interface InvariantContext {
  kube: KubeObjects;
  /** Superuser URL of the service's control database; never printed. Undefined: checked through the API only. */
  controlUrl?: string | undefined;
  api: { url: string; token: string };
  /** Namespaces the iteration used. */
  namespaces: string[];
  instanceId: string;
  logFiles: string[];
  /** Secrets that must appear nowhere but in Secrets' data. */
  planted: PlantedSecret[];
}

async function apiGet(ctx: InvariantContext, path: string): Promise<{ status: number; body: unknown }> {
  const res = await fetch(ctx.api.url + path, { headers: { authorization: `Bearer ${ctx.api.token}` } });
  const text = await res.text();
  return { status: res.status, body: text === "" ? undefined : (JSON.parse(text) as unknown) };
}

const logicalIdOf = (instanceId: string, obj: KubeObject) =>
  `k8s:${instanceId}:${obj.metadata.namespace ?? ""}/${obj.metadata.name}`;

/** Rows in the control database per logicalId, deleted ones included: a duplicate deleted later was still a duplicate. */
async function remoteRowsByLogicalId(controlUrl: string, prefix: string): Promise<Map<string, number>> {
  const client = new pg.Client({ connectionString: controlUrl });
  await client.connect();
  try {
    const result = await client.query<{ logical_id: string; n: string }>(
      `SELECT logical_id, count(*)::text AS n FROM databases WHERE logical_id LIKE $1 GROUP BY logical_id
       UNION ALL
       SELECT 'project:' || logical_id, count(*)::text FROM projects WHERE logical_id LIKE $1 GROUP BY logical_id`,
      [`${prefix}%`],
    );
    return new Map(result.rows.map((r) => [r.logical_id, Number(r.n)]));
  } finally {
    await client.end();
  }
}

/** Restores that really swapped data in, per target database, from the service's job records. */
export async function restoresPerTarget(
  controlUrl: string,
): Promise<Map<string, { restored: number; jobs: number; keys: string[] }>> {
  const client = new pg.Client({ connectionString: controlUrl });
  await client.connect();
  try {
    const result = await client.query<{ target_id: string; restored: string; jobs: string; keys: string[] }>(
      `SELECT j.target_id,
              count(r.id) FILTER (WHERE r.outcome = 'restored')::text AS restored,
              count(DISTINCT j.id)::text AS jobs,
              array_agg(DISTINCT coalesce(j.idempotency_key, '')) AS keys
         FROM jobs j LEFT JOIN job_runs r ON r.job_id = j.id
        WHERE j.kind = 'restore'
        GROUP BY j.target_id`,
    );
    return new Map(
      result.rows.map((r) => [r.target_id, { restored: Number(r.restored), jobs: Number(r.jobs), keys: r.keys }]),
    );
  } finally {
    await client.end();
  }
}

async function connects(url: string): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  // A failed connection must not print the URL: keep only the error's code and a generic message.
  client.on("error", () => undefined);
  try {
    await client.connect();
    await client.query("select 1");
    return undefined;
  } catch (error) {
    const e = error as { code?: string; message?: string };
    return e.code ?? "connection failed";
  } finally {
    await client.end().catch(() => undefined);
  }
}

export interface InvariantExpectations {
  /** Restores each target may have run (by DatabaseRestore key): at most one per key. */
  restoreKeysByTarget?: Map<string, Set<string>>;
}

export async function checkInvariants(
  ctx: InvariantContext,
  expectations: InvariantExpectations = {},
): Promise<Violation[]> {
  const violations: Violation[] = [];
  const resources: KubeObject[] = [];
  for (const ns of ctx.namespaces) {
    for (const kind of ["Project", "Database", "DatabaseRestore", "Connection"])
      resources.push(...(await ctx.kube.list(mdsApiVersion, kind, ns)));
  }

  // 1. One remote object per resource by logicalId.
  for (const obj of resources.filter((o) => o.kind === "Project" || o.kind === "Database")) {
    const logicalId = logicalIdOf(ctx.instanceId, obj);
    const collection = obj.kind === "Project" ? "projects" : "databases";
    const reply = await apiGet(ctx, `/v1/${collection}?logicalId=${encodeURIComponent(logicalId)}`);
    if (reply.status !== 200) {
      violations.push({
        invariant: "one-remote-per-resource",
        detail: `${obj.kind} ${obj.metadata.namespace}/${obj.metadata.name}: lookup by logicalId answered ${reply.status}`,
      });
      continue;
    }
    const found = ((reply.body as { data: Array<{ id: string }> }).data ?? []).map((d) => d.id);
    if (found.length > 1)
      violations.push({
        invariant: "one-remote-per-resource",
        detail: `${obj.kind} ${obj.metadata.namespace}/${obj.metadata.name}: ${found.length} remote objects (${found.join(", ")})`,
      });
    // A Ready resource must be found by its logicalId (else the lookup the operator relies on, or this check, is broken).
    if (found.length === 0 && isReady(obj) && obj.spec?.["externalId"] === undefined) {
      violations.push({
        invariant: "one-remote-per-resource",
        detail: `${obj.kind} ${obj.metadata.namespace}/${obj.metadata.name} is Ready but no remote object has its logicalId`,
      });
    }
    const id = obj.status?.["id"];
    if (typeof id === "string" && found.length === 1 && found[0] !== id && obj.spec?.["externalId"] === undefined) {
      violations.push({
        invariant: "one-remote-per-resource",
        detail: `${obj.kind} ${obj.metadata.namespace}/${obj.metadata.name}: status.id ${id} but logicalId names ${found[0]}`,
      });
    }
  }
  if (ctx.controlUrl !== undefined) {
    for (const ns of ctx.namespaces) {
      const rows = await remoteRowsByLogicalId(ctx.controlUrl, `k8s:${ctx.instanceId}:${ns}/`);
      for (const [logicalId, n] of rows) {
        if (n > 1)
          violations.push({
            invariant: "one-remote-per-resource",
            detail: `${n} remote rows (deleted included) for logicalId ${logicalId}`,
          });
      }
    }
  }

  // 2. Every Ready resource's Secret connects, with each URL it offers (so its credentials were never revoked).
  for (const obj of resources.filter((o) => o.kind !== "DatabaseRestore" && isReady(o))) {
    const secretName = obj.status?.["secretName"];
    if (typeof secretName !== "string") {
      if (obj.kind === "Database")
        violations.push({
          invariant: "ready-secret-connects",
          detail: `Database ${obj.metadata.namespace}/${obj.metadata.name} is Ready without status.secretName`,
        });
      continue;
    }
    const data = await ctx.kube.secretData(obj.metadata.namespace ?? "", secretName);
    if (data === undefined) {
      violations.push({
        invariant: "ready-secret-connects",
        detail: `${obj.kind} ${obj.metadata.namespace}/${obj.metadata.name} is Ready but Secret ${secretName} is missing`,
      });
      continue;
    }
    for (const key of ["DATABASE_URL", "DIRECT_URL"]) {
      const url = data[key];
      if (url === undefined) {
        violations.push({
          invariant: "ready-secret-connects",
          detail: `Secret ${obj.metadata.namespace}/${secretName} has no ${key}`,
        });
        continue;
      }
      const failure = await connects(url);
      if (failure !== undefined)
        violations.push({
          invariant: "ready-secret-connects",
          detail: `Secret ${obj.metadata.namespace}/${secretName} ${key} does not connect (${failure})`,
        });
    }
  }

  // 2b. A login replaced by a rotation is revoked once its grace period is over: at most one retired connection per
  // Secret, and none past its grace (30 s of slack for the requeue), checked at the service.
  for (const obj of resources.filter((o) => o.kind !== "DatabaseRestore")) {
    const retiring = (obj.status?.["rotation"] as { retiring?: { id: string; revokeAt: string } } | undefined)
      ?.retiring;
    if (retiring === undefined || Date.now() - Date.parse(retiring.revokeAt) < 30_000) continue;
    const dbId =
      obj.kind === "Project"
        ? (obj.status?.["defaultDatabase"] as { id?: string } | undefined)?.id
        : ((obj.status?.["databaseId"] ?? obj.status?.["id"]) as string | undefined);
    const reply = await apiGet(ctx, `/v1/databases/${dbId ?? ""}`);
    const alive =
      reply.status === 200 &&
      ((reply.body as { data?: { connections?: { id: string }[] } }).data?.connections ?? []).some(
        (c) => c.id === retiring.id,
      );
    if (alive)
      violations.push({
        invariant: "retired-revoked",
        detail: `${obj.kind} ${obj.metadata.namespace}/${obj.metadata.name}: connection ${retiring.id} still works past its grace period (${retiring.revokeAt})`,
      });
  }

  // 3. No restore ran twice: the service's job records, per target.
  if (ctx.controlUrl !== undefined) {
    const perTarget = await restoresPerTarget(ctx.controlUrl);
    for (const [target, keys] of expectations.restoreKeysByTarget ?? new Map<string, Set<string>>()) {
      const seen = perTarget.get(target);
      if (seen === undefined) continue;
      if (seen.restored > keys.size) {
        violations.push({
          invariant: "restore-at-most-once",
          detail: `database ${target}: ${seen.restored} restores ran for ${keys.size} DatabaseRestore key(s) (${seen.jobs} restore jobs)`,
        });
      }
    }
  }

  // 4. No finalizer stuck: nothing may still be deleting once the iteration is over.
  for (const obj of resources) {
    if (obj.metadata.deletionTimestamp !== undefined) {
      violations.push({
        invariant: "no-stuck-finalizer",
        detail: `${obj.kind} ${obj.metadata.namespace}/${obj.metadata.name} still deleting (finalizers ${JSON.stringify(obj.metadata.finalizers ?? [])})`,
      });
    }
  }

  // 5. No planted secret in any log, Event or status.
  const findings = [
    ...(await scanFiles(ctx.logFiles, ctx.planted)),
    ...(await scanKubernetes(ctx.kube.kubeConfig, ctx.planted)),
  ];
  if (findings.length > 0) violations.push({ invariant: "no-secret-leak", detail: formatFindings(findings) });

  return violations;
}

/** Every password and URL in the operator's connection Secrets: each must stay inside Secrets' data. */
export async function collectSecretValues(kube: KubeObjects, namespaces: string[]): Promise<PlantedSecret[]> {
  const out: PlantedSecret[] = [];
  for (const ns of namespaces) out.push(...connectionSecretValues(await kube.list("v1", "Secret", ns)));
  return out;
}

/**
 * The secret values (the kinds' `secretKeys`: passwords and the URLs that carry them) in those of `secrets` the
 * operator manages, labelled `<namespace>/<name>.<key>`.
 */
export function connectionSecretValues(
  secrets: ReadonlyArray<{
    metadata: {
      name?: string | undefined;
      namespace?: string | undefined;
      labels?: Record<string, string> | undefined;
    };
    data?: Record<string, string> | undefined;
  }>,
  keys: readonly string[] = secretKeys(),
): PlantedSecret[] {
  const out: PlantedSecret[] = [];
  for (const s of secrets) {
    if (s.metadata.labels?.["app.kubernetes.io/managed-by"] !== "mds-operator") continue;
    for (const key of keys) {
      const raw = s.data?.[key];
      if (raw === undefined) continue;
      const value = Buffer.from(raw, "base64").toString("utf8");
      if (value.length >= 8) out.push({ name: `${s.metadata.namespace ?? ""}/${s.metadata.name ?? ""}.${key}`, value });
    }
  }
  return out;
}
