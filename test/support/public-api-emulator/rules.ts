// How the public Management API differs from our service, as pure request and response rewrites. Each rule names
// the documented behaviour it comes from. Sources: the OpenAPI types of @prisma/management-api-sdk 1.80.0
// (node_modules/@prisma/management-api-sdk/dist/index.d.ts, "SDK" below, line numbers of that file) and the
// endpoint pages of the public documentation (prisma.io/docs/rest-api/endpoints/..., "docs" below), as read on
// 2026-11-23; src/contract/PUBLIC-API.md has the table.
//
// Requests:
// - No POST declares an `Idempotency-Key` header (SDK: `header?: never` on every operation; the word appears nowhere):
//   the header is dropped, so a re-sent POST acts twice, as it would on the public API.
// - Request bodies are picked to the fields the SDK declares for the operation; anything else is ignored, not
//   refused (the public API validates declared fields only). So `logicalId` on `POST /v1/projects/{id}/databases`
//   (SDK ~11731: not a field) is dropped, and `isDefault` on `PATCH /v1/databases/{id}` (SDK ~8254: name, branchId,
//   branchGitName, logicalId) is ignored. `POST /v1/databases` takes `logicalId` (SDK ~7793; docs "Create database").
//   Branch fields (`branchId`, `branchGitName`) go through on `POST /v1/databases` and `PATCH /v1/databases/{id}`
//   (SDK ~7835, ~8259), not on `POST /v1/projects/{id}/databases` (SDK ~11731: not fields there), and
//   `POST /v1/projects/{id}/branches` takes `gitName` and `isDefault` (SDK ~5037).
// - Branches (SDK ~387-446, ~4926-5370): our service implements them with the public API's rules and status codes
//   (PUBLIC-API.md "Branches"), so the emulator forwards them and only reshapes as everywhere (no hint, no replay).
//
// Responses:
// - Our `X-Idempotency-Replay` announcement is never sent (the public API does not replay).
// - Error bodies are `{ error: { code, message, hint? } }` (SDK ~1867): the emulator sends them without `hint`.
// - `DELETE /v1/databases/{id}` of a project's default database: 403 "Cannot delete the default environment"
//   (SDK ~8214), whether or not the project has other databases.
// - `DELETE /v1/projects/{id}`: 400 "Project cannot be deleted due to existing dependencies" (SDK ~9919; docs
//   "Delete project"). Dependencies are the non-default databases: the default one cannot be deleted on its own
//   (above), so it must go with its project, or no project with a default database could ever be deleted.
// - `POST /v1/databases/{id}/connections` answers 200 (SDK ~8543; docs "Create database connection string"), with
//   the deprecated top-level `connectionString` and `host`/`pass`/`user: null`; `POST /v1/connections` answers 201
//   (docs "Create connection").
// - Legal nulls (SDK ~7683-7745): `defaultConnectionId: null`, every connection's deprecated `directConnection: null`,
//   `branchId: null` (a database on no branch), `logicalId: null` when unset; in creation forms the deprecated top-level `connectionString` and
//   `directConnection` are null (SDK ~9767), credentials only in `endpoints.*.connectionString`.
// - Backups (SDK ~8671): no `size` (optional), `pagination.limit: null`; `backupType` may be `incremental`.
// - Unknown routes, e.g. our `POST /v1/databases/{id}/backups` and `DELETE /v1/databases/{id}/backups/{backupId}`
//   (absent from the SDK: backups are taken and expired by the service), are 404.

/** A JSON object as it travels; the emulator reshapes, it does not validate (the operator's schemas do that). */
export type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

/** Keeps only the named fields of a request body (unknown fields are ignored, as the public API ignores them). */
export function pick(body: unknown, fields: readonly string[]): Json {
  if (!isObject(body)) return {};
  return Object.fromEntries(fields.filter((f) => f in body).map((f) => [f, body[f]]));
}

/** The body fields each public operation declares. */
export const requestFields = {
  createProject: ["name", "region", "createDatabase", "logicalId", "workspaceId"],
  createDatabase: ["projectId", "name", "region", "isDefault", "source", "logicalId", "branchId", "branchGitName"],
  createProjectDatabase: ["name", "region", "isDefault", "source"],
  updateDatabase: ["name", "logicalId", "branchId", "branchGitName"],
  createBranch: ["gitName", "isDefault"],
  createConnection: ["name"],
  createConnectionFor: ["databaseId", "name"],
  restore: ["source"],
} as const;

export function publicError(status: number, code: string, message: string): { status: number; body: Json } {
  return { status, body: { error: { code, message } } };
}

/** Drops `hint`: the public API may leave it out. */
export function withoutHint(body: unknown): unknown {
  if (!isObject(body) || !isObject(body["error"])) return body;
  const { hint: _hint, ...error } = body["error"];
  return { ...body, error };
}

/** A connection as the public API may send it: no credentials in the deprecated `directConnection`. */
export function publicConnection(c: unknown): unknown {
  return isObject(c) ? { ...c, directConnection: null } : c;
}

/**
 * `GET /v1/connections/{id}`: a connection, without our service's `openSessions` (the public API documents no count of
 * a login's sessions: a client cannot tell there whether one is still open).
 */
export function publicReadConnection(c: unknown): unknown {
  if (!isObject(c)) return c;
  const { openSessions: _, ...rest } = publicConnection(c) as Json;
  return rest;
}

/** `POST /v1/databases/{id}/connections`: the connection plus the deprecated top-level fields of that response. */
export function publicCreatedConnection(c: unknown): unknown {
  if (!isObject(c)) return c;
  const endpoints = isObject(c["endpoints"]) ? c["endpoints"] : {};
  const pooled = isObject(endpoints["pooled"])
    ? endpoints["pooled"]
    : isObject(endpoints["direct"])
      ? endpoints["direct"]
      : {};
  return {
    ...(publicConnection(c) as Json),
    connectionString: pooled["connectionString"],
    host: null,
    pass: null,
    user: null,
  };
}

/** Overrides for objects the operator did not create (see foreign.ts), by database id. */
export type DatabaseOverrides = ReadonlyMap<string, Json>;

export function publicDatabase(d: unknown, overrides: DatabaseOverrides): unknown {
  if (!isObject(d)) return d;
  const out: Json = {
    ...d,
    defaultConnectionId: null,
    branchId: d["branchId"] ?? null,
    logicalId: d["logicalId"] ?? null,
    ...(overrides.get(String(d["id"])) ?? {}),
  };
  if (Array.isArray(d["connections"])) out["connections"] = d["connections"].map(publicConnection);
  // Creation forms: the deprecated top-level credentials are null, the api keys carry theirs in `connectionString`.
  if ("connectionString" in d) out["connectionString"] = null;
  if ("directConnection" in d) out["directConnection"] = null;
  if (Array.isArray(d["apiKeys"])) out["apiKeys"] = d["apiKeys"].map(publicConnection);
  return out;
}

export function publicProject(p: unknown, overrides: DatabaseOverrides): unknown {
  if (!isObject(p)) return p;
  return {
    ...p,
    logicalId: p["logicalId"] ?? null,
    ...("database" in p ? { database: p["database"] === null ? null : publicDatabase(p["database"], overrides) } : {}),
  };
}

export function publicBackup(b: unknown): unknown {
  if (!isObject(b)) return b;
  const { size: _size, ...rest } = b;
  return rest;
}

/** Applies `each` to `data` (an object or a list) of a `{ data, ... }` envelope. */
export function mapData(body: unknown, each: (item: unknown) => unknown): unknown {
  if (!isObject(body)) return body;
  const data = body["data"];
  return { ...body, data: Array.isArray(data) ? data.map(each) : each(data) };
}
