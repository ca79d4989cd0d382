import { randomBytes } from "node:crypto";
import type {
  PublicBackup,
  Connection,
  Database,
  Project,
  PublicCreatedDatabase,
  PublicCreatedProject,
} from "../../src/contract/index.ts";
import type { PublicCreatedConnection as CreatedConnection } from "../../src/contract/index.ts";
import type { MdsApi } from "../../src/resources/remote/remote-api.ts";

// An in-memory Managed Database Service for unit tests of the loop: logicalId uniqueness, Idempotency-Key replay
// (which a test can expire), connections with credentials only in creation responses, call counts and injected
// failures. The end-to-end tests use the real service.
//
// `publicApi: true` behaves as the public Management API may (its SDK types): Idempotency-Key ignored and no
// replay announced, the default database deletable only with its project (403 alone), a project with other
// databases refused with 400, PATCH without isDefault (400), legal nulls in every answer (region, defaultRegion,
// directConnection, the creation response's connectionString).

export class FakeApiError extends Error {
  readonly code: string;
  readonly status: number;
  constructor(code: string, status: number, message: string) {
    super(message);
    this.code = code;
    this.status = status;
  }
}

const id = (prefix: string) => `${prefix}_c${randomBytes(12).toString("hex")}`;
const now = () => new Date().toISOString();

export interface FakeApi extends MdsApi {
  calls: Record<string, number>;
  databases: Map<string, Database & { logicalId?: string | undefined }>;
  projects: Map<string, Project & { logicalId?: string | undefined }>;
  /** Connection id → password (what would still log in). */
  passwords: Map<string, string>;
  /**
   * Connection id → client sessions of its login (absent: none), as our service reports them on getConnection
   * (`openSessions`); the public API reports none: it cannot tell.
   */
  sessions: Map<string, number>;
  /** Forget every Idempotency-Key record, as if the replay window had passed. */
  expireReplays(): void;
  /** The next call of `operation` fails with this error. */
  failNext(operation: string, error: Error): void;
  /** Every call fails with this error until cleared (an outage). */
  outage: Error | undefined;
  /** How many reads until a created database becomes ready (0: at once). */
  provisioningReads: number;
  /** Whether responses carry `logicalId` (default true, as the real service; false: another compatible service). */
  reportsLogicalId: boolean;
  /** The next POST of `operation` lands but its response is lost (the caller sees this error). */
  loseNextResponse(
    operation: "createProject" | "createDatabase" | "createConnection" | "restoreDatabase" | "createBackup",
    error: Error,
  ): void;
  /** Every list page reports this many items the client could not read (a foreign object; see src/client/list-items.ts). */
  unreadableItems: number;
  /** The service moved the database's server: every connection's endpoints get this host and these ports. */
  moveEndpoints(databaseId: string, to: { host: string; directPort: number; pooledPort: number }): void;
  /** Restores keep the target `recovering` for this many reads (0: done at once). */
  restoreReads: number;
  /** Restores that acted (a replayed POST does not count). */
  restores: number;
  /** Whether creation responses carry connection strings (the public API may leave them out). */
  connectionStrings: boolean;
  /** Backups taken with createBackup (a replayed POST does not count); the public API has no such endpoint (404). */
  backupsTaken: number;
  /** A taken backup stays `running` for this many listBackups reads (0: completed at once). */
  backupReads: number;
  /** Taken backups by database id, newest first (besides the provider's daily one every list shows). */
  backups: Map<string, (PublicBackup & { readsLeft: number })[]>;
}

export function createFakeApi(options: { publicApi?: boolean } = {}): FakeApi {
  const publicApi = options.publicApi ?? false;
  const databases: FakeApi["databases"] = new Map();
  const projects: FakeApi["projects"] = new Map();
  const connections = new Map<string, Connection>();
  /** Database id → its connection ids (a view must not scan every connection: benchmarks hold 10,000). */
  const connectionsOf = new Map<string, Set<string>>();
  const passwords = new Map<string, string>();
  const replays = new Map<string, { body: string; response: unknown }>();
  const failures = new Map<string, Error>();
  const calls: Record<string, number> = {};
  const pendingReads = new Map<string, number>();
  const lostResponses = new Map<string, Error>();
  const restoreReadsLeft = new Map<string, number>();
  /** The wire form of `logicalId`: null when none was given, absent when this service does not report it. */
  const withLogicalId = <T extends object>(
    value: T,
    logicalId: string | undefined,
  ): T & { logicalId?: string | null } => (api.reportsLogicalId ? { ...value, logicalId: logicalId ?? null } : value);
  async function landed<T>(op: string, result: Promise<T>): Promise<T> {
    const value = await result;
    const lost = lostResponses.get(op);
    if (lost !== undefined) {
      lostResponses.delete(op);
      throw lost;
    }
    return value;
  }

  function enter(op: string) {
    calls[op] = (calls[op] ?? 0) + 1;
    if (api.outage) throw api.outage;
    const f = failures.get(op);
    if (f) {
      failures.delete(op);
      throw f;
    }
  }

  async function idempotent<T>(key: string | undefined, body: unknown, fn: () => T): Promise<T> {
    if (key === undefined || publicApi) return fn();
    const rec = replays.get(key);
    const b = JSON.stringify(body);
    if (rec) {
      if (rec.body !== b) throw new FakeApiError("unprocessable", 422, "Idempotency-Key reused with another body");
      return structuredClone(rec.response) as T;
    }
    const response = fn();
    replays.set(key, { body: b, response: structuredClone(response) });
    return response;
  }

  function newConnection(db: { id: string; name: string }, name: string): CreatedConnection {
    const cid = id("con");
    const user = `u_${cid.slice(5, 15)}`;
    const pass = randomBytes(16).toString("hex");
    passwords.set(cid, pass);
    const url = (port: number) =>
      `postgresql://${user}:${pass}@db.example:${port}/d_${db.id.slice(4, 12)}?sslmode=require`;
    const conn: Connection = {
      id: cid,
      type: "connection",
      url: `https://api.example/v1/connections/${cid}`,
      name,
      createdAt: now(),
      kind: "postgres",
      endpoints: { direct: { host: "db.example", port: 5432 }, pooled: { host: "pool.example", port: 6432 } },
      directConnection: { host: "db.example:5432", user, pass: "********" },
      database: { id: db.id, url: `https://api.example/v1/databases/${db.id}`, name: db.name },
    };
    connections.set(cid, conn);
    connectionsOf.set(db.id, (connectionsOf.get(db.id) ?? new Set()).add(cid));
    return {
      ...conn,
      directConnection: publicApi ? null : { ...conn.directConnection, pass },
      endpoints: api.connectionStrings
        ? {
            direct: { host: "db.example", port: 5432, connectionString: url(5432) },
            pooled: { host: "pool.example", port: 6432, connectionString: url(6432) },
          }
        : { direct: { host: "db.example", port: 5432 }, pooled: { host: "pool.example", port: 6432 } },
    };
  }

  /** The public API's legal nulls on a connection as listed. */
  const publicConnection = (c: Connection): Connection => (publicApi ? { ...c, directConnection: null as never } : c);

  function view(dbId: string): Database {
    const db = databases.get(dbId)!;
    const left = pendingReads.get(dbId) ?? 0;
    if (db.status === "provisioning" && left <= 0) db.status = "ready";
    else if (left > 0) pendingReads.set(dbId, left - 1);
    const { logicalId, ...rest } = db;
    if (db.status === "recovering") {
      const reads = restoreReadsLeft.get(dbId) ?? 0;
      if (reads <= 0) db.status = "ready";
      else restoreReadsLeft.set(dbId, reads - 1);
    }
    const own = [...(connectionsOf.get(dbId) ?? [])].map((cid) => publicConnection(connections.get(cid) as Connection));
    return structuredClone(
      withLogicalId({ ...rest, ...(publicApi ? { region: null as never } : {}), connections: own }, logicalId),
    );
  }

  function createDb(
    projectId: string,
    body: {
      name?: string | undefined;
      isDefault?: boolean | undefined;
      logicalId?: string | undefined;
      source?: Database["source"] | undefined;
    },
  ): PublicCreatedDatabase {
    const p = projects.get(projectId);
    if (p === undefined) throw new FakeApiError("not_found", 404, `project "${projectId}" not found`);
    if (body.logicalId !== undefined) {
      const dup = [...databases.values()].find((d) => d.project.id === projectId && d.logicalId === body.logicalId);
      if (dup) throw new FakeApiError("conflict", 409, `logicalId already used by "${dup.id}"`);
    }
    const dbId = id("db");
    const name = body.name ?? "db";
    const conn = newConnection({ id: dbId, name }, "default");
    const db: Database & { logicalId?: string | undefined } = {
      id: dbId,
      type: "database",
      url: `https://api.example/v1/databases/${dbId}`,
      name,
      status: "provisioning",
      createdAt: now(),
      isDefault: body.isDefault ?? false,
      defaultConnectionId: conn.id,
      region: { id: "us-east-1", name: "us-east-1" },
      source: body.source ?? { type: "empty" },
      connections: [],
      project: { id: p.id, url: p.url, name: p.name },
      logicalId: body.logicalId,
    };
    databases.set(dbId, db);
    pendingReads.set(dbId, api.provisioningReads);
    const { logicalId, ...rest } = db;
    return withLogicalId(
      {
        ...rest,
        ...(publicApi ? { region: null as never } : {}),
        connections: [conn],
        apiKeys: [],
        connectionString: publicApi ? (null as never) : (conn.endpoints.direct!.connectionString ?? null),
        directConnection: conn.directConnection,
      },
      logicalId,
    );
  }

  function dropDatabase(dbId: string) {
    databases.delete(dbId);
    for (const cid of connectionsOf.get(dbId) ?? []) {
      connections.delete(cid);
      passwords.delete(cid);
    }
    connectionsOf.delete(dbId);
  }

  const branches = new Map<
    string,
    { id: string; projectId: string; gitName: string; isDefault: boolean; role: "production" | "preview" }
  >();
  let branchesMade = 0;
  const page = <T>(items: T[], params: { limit?: number; cursor?: string } | undefined) => {
    const limit = params?.limit ?? 100;
    const start = params?.cursor === undefined ? 0 : Number(params.cursor);
    const data = items.slice(start, start + limit);
    const hasMore = start + limit < items.length;
    return { data, pagination: { hasMore, nextCursor: hasMore ? String(start + limit) : null } };
  };

  const api: FakeApi = {
    calls,
    databases,
    projects,
    passwords,
    sessions: new Map(),
    outage: undefined,
    provisioningReads: 0,
    reportsLogicalId: true,
    unreadableItems: 0,
    restoreReads: 0,
    restores: 0,
    connectionStrings: true,
    backupsTaken: 0,
    backupReads: 0,
    backups: new Map(),
    replaysIdempotencyKeys: () => !publicApi,
    moveEndpoints(databaseId, to) {
      for (const cid of connectionsOf.get(databaseId) ?? []) {
        const c = connections.get(cid)!;
        c.endpoints = {
          direct: { host: to.host, port: to.directPort },
          pooled: { host: to.host, port: to.pooledPort },
        };
      }
    },
    loseNextResponse: (op, err) => lostResponses.set(op, err),
    expireReplays: () => replays.clear(),
    failNext: (op, err) => failures.set(op, err),
    async createProject(body, o) {
      enter("createProject");
      return landed(
        "createProject",
        idempotent(o?.idempotencyKey, body, (): PublicCreatedProject => {
          if (body.logicalId !== undefined && [...projects.values()].some((p) => p.logicalId === body.logicalId)) {
            throw new FakeApiError("conflict", 409, "logicalId already used");
          }
          const pid = id("proj");
          const p = {
            id: pid,
            type: "project" as const,
            url: `https://api.example/v1/projects/${pid}`,
            name: body.name ?? "p",
            createdAt: now(),
            defaultRegion: publicApi ? (null as never) : (body.region ?? "us-east-1"),
            workspace: { id: "wksp_c000000000000000000000000", url: "https://api.example/w", name: "default" },
            logicalId: body.logicalId,
          };
          projects.set(pid, p);
          const database =
            body.createDatabase === false
              ? null
              : (({ project: _p, ...d }) => d)(createDb(pid, { name: "default", isDefault: true }));
          const { logicalId, ...rest } = p;
          return { ...withLogicalId(rest, logicalId), database };
        }),
      );
    },
    async getProject(pid) {
      enter("getProject");
      const p = projects.get(pid);
      if (!p) throw new FakeApiError("not_found", 404, "not found");
      const { logicalId, ...rest } = p;
      return structuredClone(withLogicalId(rest, logicalId));
    },
    async listProjects(params) {
      enter("listProjects");
      const all = [...projects.values()]
        .filter((p) => params?.logicalId === undefined || p.logicalId === params.logicalId)
        .map(({ logicalId, ...rest }) => structuredClone(withLogicalId(rest, logicalId)));
      return { ...page(all, params), ...(api.unreadableItems > 0 ? { skipped: api.unreadableItems } : {}) };
    },
    async deleteProject(pid) {
      enter("deleteProject");
      if (!projects.has(pid)) throw new FakeApiError("not_found", 404, "not found");
      const own = [...databases.values()].filter((d) => d.project.id === pid);
      if (publicApi) {
        // The public API deletes the default database with its project, and refuses while others exist (400).
        if (own.some((d) => !d.isDefault))
          throw new FakeApiError("invalid_request", 400, "Project cannot be deleted due to existing dependencies");
        for (const d of own) dropDatabase(d.id);
      } else if (own.length > 0) throw new FakeApiError("conflict", 409, "project has databases");
      projects.delete(pid);
    },
    async createDatabase(body, o) {
      enter("createDatabase");
      const { projectId: pid, ...rest } = body;
      return landed(
        "createDatabase",
        idempotent(o?.idempotencyKey, body, () => createDb(pid, rest)),
      );
    },
    async getDatabase(dbId) {
      enter("getDatabase");
      if (!databases.has(dbId)) throw new FakeApiError("not_found", 404, "not found");
      return view(dbId);
    },
    async updateDatabase(dbId, body) {
      enter("updateDatabase");
      const db = databases.get(dbId);
      if (!db) throw new FakeApiError("not_found", 404, "not found");
      if (publicApi && "isDefault" in body)
        throw new FakeApiError("invalid_request", 400, "Unrecognized key: isDefault");
      if (body.name !== undefined) db.name = body.name;
      if (body.isDefault) db.isDefault = true;
      return view(dbId);
    },
    async deleteDatabase(dbId) {
      enter("deleteDatabase");
      const db = databases.get(dbId);
      if (db === undefined) throw new FakeApiError("not_found", 404, "not found");
      if (publicApi && db.isDefault) throw new FakeApiError("forbidden", 403, "Cannot delete the default environment");
      dropDatabase(dbId);
    },
    async restoreDatabase(dbId, body, o) {
      enter("restoreDatabase");
      return landed(
        "restoreDatabase",
        idempotent(o?.idempotencyKey, { dbId, body }, () => {
          const db = databases.get(dbId);
          if (!db) throw new FakeApiError("not_found", 404, "not found");
          api.restores++;
          db.source = body.source;
          db.status = api.restoreReads > 0 ? "recovering" : "ready";
          restoreReadsLeft.set(dbId, api.restoreReads);
          return view(dbId);
        }),
      );
    },
    async listDatabases(params) {
      enter("listDatabases");
      const matching = [...databases.values()].filter(
        (d) =>
          (params?.projectId === undefined || d.project.id === params.projectId) &&
          (params?.logicalId === undefined || d.logicalId === params.logicalId),
      );
      // Only the page is read (a read can finish provisioning: see provisioningReads).
      const listed = page(matching, params);
      return {
        ...listed,
        data: listed.data.map((d) => view(d.id)),
        ...(api.unreadableItems > 0 ? { skipped: api.unreadableItems } : {}),
      };
    },
    async createBranch(pid, body, o) {
      enter("createBranch");
      // As our service: a key seen before replays its first answer, even for a branch soft-deleted since.
      return idempotent(o?.idempotencyKey, { pid, body }, () => {
        if (!projects.has(pid)) throw new FakeApiError("not_found", 404, "not found");
        if ([...branches.values()].some((b) => b.projectId === pid && b.gitName === body.gitName))
          throw new FakeApiError("conflict", 409, `gitName ${body.gitName} is already used`);
        const first = ![...branches.values()].some((b) => b.projectId === pid);
        const branch = {
          id: `br_c${String(++branchesMade).padStart(24, "0")}`,
          projectId: pid,
          gitName: body.gitName,
          isDefault: first,
          role: first ? ("production" as const) : ("preview" as const),
        };
        branches.set(branch.id, branch);
        return branch;
      });
    },
    async listBranches(pid, params) {
      enter("listBranches");
      return page(
        [...branches.values()].filter(
          (b) => b.projectId === pid && (params?.gitName === undefined || b.gitName === params.gitName),
        ),
        params,
      );
    },
    async deleteBranch(id) {
      enter("deleteBranch");
      const branch = branches.get(id);
      if (branch === undefined) throw new FakeApiError("not_found", 404, "not found");
      if (branch.isDefault || branch.role === "production")
        throw new FakeApiError("unprocessable", 422, "the default or production branch cannot be deleted");
      branches.delete(id);
    },
    async listBackups(dbId) {
      enter("listBackups");
      const taken = (api.backups.get(dbId) ?? []).map(({ readsLeft: _reads, ...b }) => b);
      for (const b of api.backups.get(dbId) ?? []) {
        if (b.status === "running" && b.readsLeft-- <= 0) Object.assign(b, { status: "completed", size: 4096 });
      }
      return {
        data: [
          ...taken,
          {
            id: "bkp_c000000000000000000000001",
            type: "backup",
            backupType: "full",
            status: "completed",
            size: 1,
            createdAt: now(),
          },
        ],
        meta: { backupRetentionDays: 7 },
        pagination: { hasMore: false, limit: 100 },
      };
    },
    async createBackup(dbId, o) {
      enter("createBackup");
      if (publicApi) throw new FakeApiError("not_found", 404, "Not found");
      return landed(
        "createBackup",
        idempotent(o?.idempotencyKey, { dbId }, () => {
          if (!databases.has(dbId)) throw new FakeApiError("not_found", 404, `database "${dbId}" not found`);
          const backup = {
            id: id("bkp"),
            type: "backup" as const,
            backupType: "full" as const,
            status: api.backupReads > 0 ? ("running" as const) : ("completed" as const),
            size: api.backupReads > 0 ? null : 4096,
            createdAt: now(),
          };
          api.backupsTaken++;
          api.backups.set(dbId, [{ ...backup, readsLeft: api.backupReads }, ...(api.backups.get(dbId) ?? [])]);
          return backup;
        }),
      );
    },
    async deleteBackup(dbId, backupId) {
      enter("deleteBackup");
      if (publicApi) throw new FakeApiError("not_found", 404, "Not found");
      const taken = api.backups.get(dbId) ?? [];
      const found = taken.find((b) => b.id === backupId);
      // Only a backup of that database (a backup id under another database is 404, as at our service).
      if (!databases.has(dbId) || found === undefined)
        throw new FakeApiError("not_found", 404, `backup "${backupId}" not found`);
      if (found.status === "running") throw new FakeApiError("conflict", 409, `backup "${backupId}" is running`);
      api.backups.set(
        dbId,
        taken.filter((b) => b.id !== backupId),
      );
    },
    async createConnection(dbId, body, o) {
      enter("createConnection");
      return landed(
        "createConnection",
        idempotent(o?.idempotencyKey, { dbId, body }, () => {
          const db = databases.get(dbId);
          if (!db) throw new FakeApiError("not_found", 404, "not found");
          return newConnection(db, body.name);
        }),
      );
    },
    async getConnection(cid) {
      enter("getConnection");
      const conn = connections.get(cid);
      if (conn === undefined) throw new FakeApiError("not_found", 404, "not found");
      return publicApi ? publicConnection(conn) : { ...conn, openSessions: api.sessions.get(cid) ?? 0 };
    },
    async deleteConnection(cid) {
      enter("deleteConnection");
      const conn = connections.get(cid);
      if (conn === undefined) throw new FakeApiError("not_found", 404, "not found");
      connections.delete(cid);
      connectionsOf.get(conn.database.id)?.delete(cid);
      passwords.delete(cid);
      api.sessions.delete(cid); // a revocation ends the login's sessions
    },
  };
  return api;
}
