import {
  maskedPassword,
  regionNames,
  type ApiKey,
  type Backup,
  type Branch,
  type Connection,
  type CreatedConnection,
  type Database,
  type Project,
  type Region,
} from "../../contract/index.ts";
import { publicEndpoint, serverConfigOf, type ServiceConfig } from "../config/config.ts";
import type { BackupRow, BranchRow, ConnectionRow, DatabaseRow, ProjectRow } from "../store/rows.ts";

// Rows → wire resources. Secrets (passwords) are inputs only at creation time; everything else masks them.

const url = (base: string, collection: string, id: string) => `${base}/v1/${collection}/${id}`;

type HostPort = { host: string; port: number };
/** `query`: everything after `?` in connection strings through that endpoint (sslmode first). */
type Endpoints = {
  direct: HostPort;
  pooled: HostPort;
  accelerate?: HostPort;
  directQuery: string;
  pooledQuery: string;
  accelerateQuery: string;
};

/** The endpoints of the server the database lives on (its own host, port and pooler, never another server's). */
function endpointsOf(config: ServiceConfig, db: Pick<DatabaseRow, "region" | "server">): Endpoints {
  const r = serverConfigOf(config, db);
  if (!r) throw new Error(`region ${db.region} has no server ${db.server ?? ""} configured`);
  const direct = publicEndpoint(r);
  const sslmode = `sslmode=${encodeURIComponent(r.sslmode)}`;
  // A path stays readable (libpq and pg both decode %XX; `/` needs no escaping in a query).
  const directQuery = r.sslrootcert
    ? `${sslmode}&sslrootcert=${encodeURIComponent(r.sslrootcert).replace(/%2F/g, "/")}`
    : sslmode;
  // A transaction-mode PgBouncer: Prisma must not use named prepared statements there (`pgbouncer=true`).
  const pooledQuery = r.pooler?.pgbouncer ? `${directQuery}&pgbouncer=true` : directQuery;
  const pooled = r.pooler ? { host: r.pooler.host, port: r.pooler.port } : direct;
  return {
    direct,
    pooled,
    ...(r.accelerate ? { accelerate: r.accelerate } : {}),
    directQuery,
    pooledQuery,
    accelerateQuery: sslmode,
  };
}

function connectionString(
  host: string,
  port: number,
  user: string,
  password: string,
  database: string,
  query: string,
): string {
  return `postgresql://${encodeURIComponent(user)}:${encodeURIComponent(password)}@${host}:${port}/${encodeURIComponent(database)}?${query}`;
}

export function renderConnection(config: ServiceConfig, db: DatabaseRow, c: ConnectionRow): Connection {
  const e = endpointsOf(config, db);
  return {
    id: c.id,
    type: "connection",
    url: url(config.baseUrl, "connections", c.id),
    name: c.name,
    createdAt: c.created_at.toISOString(),
    kind: "postgres",
    endpoints: { direct: e.direct, pooled: e.pooled, ...(e.accelerate ? { accelerate: e.accelerate } : {}) },
    directConnection: { host: `${e.direct.host}:${e.direct.port}`, user: c.role_name, pass: maskedPassword },
    database: { id: db.id, url: url(config.baseUrl, "databases", db.id), name: db.name },
  };
}

export function renderCreatedConnection(
  config: ServiceConfig,
  db: DatabaseRow,
  c: ConnectionRow,
  password: string,
): CreatedConnection {
  const base = renderConnection(config, db, c);
  const e = endpointsOf(config, db);
  const cs = (ep: HostPort, query: string) => ({
    ...ep,
    connectionString: connectionString(ep.host, ep.port, c.role_name, password, db.pg_name, query),
  });
  return {
    ...base,
    endpoints: {
      direct: cs(e.direct, e.directQuery),
      pooled: cs(e.pooled, e.pooledQuery),
      ...(e.accelerate ? { accelerate: cs(e.accelerate, e.accelerateQuery) } : {}),
    },
    directConnection: { ...base.directConnection, pass: password },
  };
}

/**
 * POST /v1/connections and rotate, in the public API's form: the creation form plus its deprecated top-level
 * `connectionString` (pooled, as in apiKeys). Its deprecated `host`, `user` and `pass` are null, which the public
 * API allows, so the password is not repeated once more.
 */
export function renderIssuedConnection(config: ServiceConfig, db: DatabaseRow, c: ConnectionRow, password: string) {
  const e = endpointsOf(config, db);
  return {
    ...renderCreatedConnection(config, db, c, password),
    connectionString: connectionString(e.pooled.host, e.pooled.port, c.role_name, password, db.pg_name, e.pooledQuery),
    host: null,
    user: null,
    pass: null,
  };
}

function renderApiKey(config: ServiceConfig, db: DatabaseRow, c: ConnectionRow, password: string): ApiKey {
  const { database: _database, ...rest } = renderConnection(config, db, c);
  const e = endpointsOf(config, db);
  return {
    ...rest,
    directConnection: { ...rest.directConnection, pass: password },
    connectionString: connectionString(e.pooled.host, e.pooled.port, c.role_name, password, db.pg_name, e.pooledQuery),
  };
}

function databaseFields(config: ServiceConfig, db: DatabaseRow) {
  return {
    id: db.id,
    type: "database" as const,
    url: url(config.baseUrl, "databases", db.id),
    name: db.name,
    status: db.status,
    createdAt: db.created_at.toISOString(),
    isDefault: db.is_default,
    defaultConnectionId: db.default_connection_id,
    region: { id: db.region, name: regionNames[db.region as Region] ?? db.region },
    source: db.source,
    logicalId: db.logical_id,
    branchId: db.branch_id,
  };
}

export function renderDatabase(config: ServiceConfig, db: DatabaseRow, connections: ConnectionRow[]): Database {
  return {
    ...databaseFields(config, db),
    connections: connections.map((c) => renderConnection(config, db, c)),
    project: { id: db.project_id, url: url(config.baseUrl, "projects", db.project_id), name: db.project_name },
  };
}

/** The full creation form: the new connection with its password, as connection, apiKey and top-level fields. */
export function renderCreatedDatabase(config: ServiceConfig, db: DatabaseRow, c: ConnectionRow, password: string) {
  const e = endpointsOf(config, db);
  const created = renderCreatedConnection(config, db, c, password);
  return {
    ...databaseFields(config, db),
    connections: [created],
    project: { id: db.project_id, url: url(config.baseUrl, "projects", db.project_id), name: db.project_name },
    apiKeys: [renderApiKey(config, db, c, password)],
    connectionString: connectionString(e.pooled.host, e.pooled.port, c.role_name, password, db.pg_name, e.pooledQuery),
    directConnection: created.directConnection,
  };
}

/** POST /v1/databases (the seed's endpoint 2): the creation form with the new connection strings only in `connections`. */
export function renderCreatedDatabaseConnections(
  config: ServiceConfig,
  db: DatabaseRow,
  c: ConnectionRow,
  password: string,
) {
  const {
    apiKeys: _a,
    connectionString: _c,
    directConnection: _d,
    ...withConnections
  } = renderCreatedDatabase(config, db, c, password);
  return withConnections;
}

export function renderProject(config: ServiceConfig, p: ProjectRow): Project {
  return {
    id: p.id,
    type: "project",
    url: url(config.baseUrl, "projects", p.id),
    name: p.name,
    createdAt: p.created_at.toISOString(),
    defaultRegion: p.default_region,
    workspace: { id: p.workspace_id, url: url(config.baseUrl, "workspaces", p.workspace_id), name: p.workspace_name },
    logicalId: p.logical_id,
  };
}

export function renderBranch(config: ServiceConfig, b: BranchRow): Branch {
  return {
    id: b.id,
    type: "branch",
    url: url(config.baseUrl, "branches", b.id),
    gitName: b.git_name,
    isDefault: b.is_default,
    role: b.role,
    createdAt: b.created_at.toISOString(),
    updatedAt: b.updated_at.toISOString(),
    project: { id: b.project_id, url: url(config.baseUrl, "projects", b.project_id), name: b.project_name },
  };
}

export function renderBackup(b: BackupRow): Backup {
  return {
    id: b.id,
    type: "backup",
    backupType: "full",
    status: b.status,
    size: b.size === null ? null : Number(b.size),
    createdAt: b.created_at.toISOString(),
  };
}

/** POST /v1/projects: the project with its default database in the creation form, without the project it is inside of. */
export function renderCreatedProject(
  config: ServiceConfig,
  p: ProjectRow,
  database: { row: DatabaseRow; connection: ConnectionRow; password: string } | null,
) {
  let nested: Omit<ReturnType<typeof renderCreatedDatabase>, "project"> | null = null;
  if (database) {
    const { project: _project, ...rest } = renderCreatedDatabase(
      config,
      database.row,
      database.connection,
      database.password,
    );
    nested = rest;
  }
  return { ...renderProject(config, p), database: nested };
}
