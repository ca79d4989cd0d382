import { z } from "zod";
import { BackupId, BranchId, ConnectionId, DatabaseId, ProjectId } from "./ids.ts";

// Response schemas. Objects are not strict: a client tolerates unknown extra fields (forward compatibility),
// but every field the seed names is required with its type.

const Url = z.url();
const CreatedAt = z.iso.datetime({ offset: false });

export const DatabaseStatus = z.enum(["provisioning", "ready", "recovering", "failure"]);
export type DatabaseStatus = z.infer<typeof DatabaseStatus>;

const Ref = z.object({ id: z.string(), url: Url, name: z.string() });
type Ref = z.infer<typeof Ref>;

export const RegionRef = z.object({ id: z.string(), name: z.string() });

export const Source = z.discriminatedUnion("type", [
  z.object({ type: z.literal("empty") }),
  z.object({ type: z.literal("backup"), databaseId: z.string(), backupId: z.string() }),
  z.object({ type: z.literal("database"), databaseId: z.string() }),
]);
export type Source = z.infer<typeof Source>;

export const Endpoint = z.object({ host: z.string(), port: z.number().int() });
const EndpointWithSecret = Endpoint.extend({ connectionString: z.string() });
export type Endpoint = z.infer<typeof Endpoint>;

const endpointsOf = <T extends z.ZodType>(endpoint: T) =>
  z.object({ direct: endpoint.optional(), pooled: endpoint.optional(), accelerate: endpoint.optional() });

export const DirectConnection = z.object({ host: z.string(), pass: z.string(), user: z.string() });
export type DirectConnection = z.infer<typeof DirectConnection>;

/** The mask that replaces `directConnection.pass` outside creation responses (docs/decisions.md#secrets-in-responses). */
export const maskedPassword = "********";

export const Connection = z.object({
  id: ConnectionId,
  type: z.literal("connection"),
  url: Url,
  name: z.string(),
  createdAt: CreatedAt,
  kind: z.string(),
  endpoints: endpointsOf(Endpoint),
  directConnection: DirectConnection,
  database: Ref,
});
export type Connection = z.infer<typeof Connection>;

/**
 * GET /v1/connections/{id} at our service: the connection and `openSessions`, how many client sessions use its login
 * now (an extension, docs/decisions.md#extensions; the public API has no such field, and no list carries it). Absent
 * when the service cannot see them: behind a pooler it does not run itself.
 */
export const ConnectionWithSessions = Connection.extend({ openSessions: z.number().int().min(0).optional() });
export type ConnectionWithSessions = z.infer<typeof ConnectionWithSessions>;

/** A connection in a creation response: every endpoint carries its connection string. */
export const CreatedConnection = Connection.extend({ endpoints: endpointsOf(EndpointWithSecret) });
export type CreatedConnection = z.infer<typeof CreatedConnection>;

export const ApiKey = Connection.omit({ database: true }).extend({ connectionString: z.string() });
export type ApiKey = z.infer<typeof ApiKey>;

const databaseFields = {
  id: DatabaseId,
  type: z.literal("database"),
  url: Url,
  name: z.string(),
  status: DatabaseStatus,
  createdAt: CreatedAt,
  isDefault: z.boolean(),
  defaultConnectionId: z.string(),
  region: RegionRef,
  source: Source,
  /** The caller's idempotent identity given at creation; optional so other compatible services still parse. */
  logicalId: z.string().nullable().optional(),
  /** The branch the database is on; null: none (a project without branches); optional so other services still parse. */
  branchId: z.string().nullable().optional(),
};

/** A database as GET, list, PATCH and restore return it: no usable secret anywhere. */
export const Database = z.object({ ...databaseFields, connections: z.array(Connection), project: Ref });
export type Database = z.infer<typeof Database>;

/** POST /v1/databases: endpoint connection strings, no top-level credentials (seed, endpoint 2). */
export const DatabaseWithCredentials = Database.extend({ connections: z.array(CreatedConnection) });
export type DatabaseWithCredentials = z.infer<typeof DatabaseWithCredentials>;

const creationFields = {
  connections: z.array(CreatedConnection),
  apiKeys: z.array(ApiKey),
  connectionString: z.string(),
  directConnection: DirectConnection,
};

/** POST /v1/projects/{id}/databases: the full creation form. */
export const CreatedDatabase = Database.extend(creationFields);
export type CreatedDatabase = z.infer<typeof CreatedDatabase>;

/** The database nested in a project creation response: creation form, without `project`. */
const ProjectDatabase = z.object({ ...databaseFields, ...creationFields });
type ProjectDatabase = z.infer<typeof ProjectDatabase>;

export const Project = z.object({
  id: ProjectId,
  type: z.literal("project"),
  url: Url,
  name: z.string(),
  createdAt: CreatedAt,
  defaultRegion: z.string(),
  workspace: Ref,
  /** The caller's idempotent identity given at creation; optional so other compatible services still parse. */
  logicalId: z.string().nullable().optional(),
});
export type Project = z.infer<typeof Project>;

/** POST /v1/projects: the project with its database in creation form (`null` with `createDatabase: false`). */
export const CreatedProject = Project.extend({ database: ProjectDatabase.nullable() });
export type CreatedProject = z.infer<typeof CreatedProject>;

/** A branch of a project (the public API's preview environments): GET, list, POST and PATCH return it. */
export const Branch = z.object({
  id: BranchId,
  type: z.literal("branch"),
  url: Url,
  gitName: z.string(),
  isDefault: z.boolean(),
  role: z.enum(["production", "preview"]),
  createdAt: CreatedAt,
  updatedAt: CreatedAt,
  project: Ref,
});
export type Branch = z.infer<typeof Branch>;

export const BackupStatus = z.enum(["running", "completed", "failed"]);
export const Backup = z.object({
  id: BackupId,
  type: z.literal("backup"),
  backupType: z.literal("full"),
  status: BackupStatus,
  size: z.number().int().nonnegative().nullable(),
  createdAt: CreatedAt,
});
export type Backup = z.infer<typeof Backup>;

// Envelopes.
export const Pagination = z.object({ nextCursor: z.string().nullable(), hasMore: z.boolean() });
export type Pagination = z.infer<typeof Pagination>;

export const dataOf = <T extends z.ZodType>(resource: T) => z.object({ data: resource });
export const pageOf = <T extends z.ZodType>(resource: T) =>
  z.object({ data: z.array(resource), pagination: Pagination });
/** `skipped`: items of the page a client could not read and left out (so the page cannot prove an absence). */
export type Page<T> = { data: T[]; pagination: Pagination; skipped?: number };

export const BackupList = z.object({
  data: z.array(Backup),
  meta: z.object({ backupRetentionDays: z.number().int() }),
  pagination: z.object({ hasMore: z.boolean(), limit: z.number().int() }),
});
export type BackupList = z.infer<typeof BackupList>;

export const OAuthTokenResponse = z.object({
  access_token: z.string(),
  token_type: z.literal("Bearer"),
  expires_in: z.number().int().positive(),
  refresh_token: z.string(),
  scope: z.string(),
});
export type OAuthTokenResponse = z.infer<typeof OAuthTokenResponse>;

/**
 * Our extension (TEAM decision): every /v1 response of a server that replays a POST's Idempotency-Key carries this
 * header with the seconds a key replays. A client re-sends a POST that may have reached the server only after it
 * has seen it; the public API never sends it.
 */
export const idempotencyReplayHeader = "x-idempotency-replay";
