import { z } from "zod";
import { ErrorBody } from "./errors.ts";
import {
  ApiKey,
  Backup,
  BackupList,
  BackupStatus,
  Connection,
  ConnectionWithSessions,
  Database,
  DatabaseStatus,
  DirectConnection,
  Endpoint,
  Pagination,
  Project,
  RegionRef,
  Source,
} from "./resources.ts";

// What a client must accept: every shape the public Management API of this family may send (the OpenAPI types of
// @prisma/management-api-sdk, see src/contract/PUBLIC-API.md). Derived from the strict schemas of
// resources.ts by loosening exactly the fields where the public API allows more, so there is one schema source: our
// service renders and tests the strict shapes (src/contract/), the client reads these.

/** A known value, or one a newer server added (read as a plain string; callers treat it as "unknown"). */
const openEnum = <T extends z.ZodEnum>(known: T) => z.union([known, z.string()]);

// The public API writes date-time strings in any RFC 3339 form.
const DateTime = z.iso.datetime({ offset: true });

const PublicSource = z
  .union([...Source.options, z.object({ type: z.literal("database"), databaseId: z.string() })])
  .nullable();
type PublicSource = z.infer<typeof PublicSource>;

export const PublicConnection = Connection.extend({
  createdAt: DateTime,
  directConnection: DirectConnection.nullable().optional(),
});
export type PublicConnection = z.infer<typeof PublicConnection>;

/**
 * GET /v1/connections/{id}. `openSessions` is our service's extension: absent at the public API, which cannot tell;
 * a value this client cannot read (a newer server's) reads as absent too.
 */
export const PublicConnectionRead = PublicConnection.extend({
  openSessions: ConnectionWithSessions.shape.openSessions.optional().catch(undefined),
});
export type PublicConnectionRead = z.infer<typeof PublicConnectionRead>;

const PublicEndpointWithSecret = Endpoint.extend({ connectionString: z.string().optional() });
/** A connection in a creation response: the public API may leave out any endpoint or its connection string. */
export const PublicCreatedConnection = PublicConnection.extend({
  endpoints: z.object({
    direct: PublicEndpointWithSecret.optional(),
    pooled: PublicEndpointWithSecret.optional(),
    accelerate: PublicEndpointWithSecret.optional(),
  }),
});
export type PublicCreatedConnection = z.infer<typeof PublicCreatedConnection>;

const publicDatabaseFields = {
  createdAt: DateTime,
  status: openEnum(DatabaseStatus),
  defaultConnectionId: z.string().nullable(),
  region: RegionRef.nullable(),
  source: PublicSource,
  branchId: z.string().nullable().optional(),
};

export const PublicDatabase = Database.extend({ ...publicDatabaseFields, connections: z.array(PublicConnection) });
export type PublicDatabase = z.infer<typeof PublicDatabase>;

/** POST /v1/databases. */
export const PublicDatabaseWithCredentials = PublicDatabase.extend({ connections: z.array(PublicCreatedConnection) });
export type PublicDatabaseWithCredentials = z.infer<typeof PublicDatabaseWithCredentials>;

const publicCreationFields = {
  connections: z.array(PublicCreatedConnection),
  apiKeys: z
    .array(ApiKey.extend({ createdAt: DateTime, directConnection: DirectConnection.nullable().optional() }))
    .optional(),
  connectionString: z.string().nullable().optional(),
  directConnection: DirectConnection.nullable().optional(),
};

/** POST /v1/projects/{id}/databases. */
export const PublicCreatedDatabase = PublicDatabase.extend(publicCreationFields);
export type PublicCreatedDatabase = z.infer<typeof PublicCreatedDatabase>;

/** The database nested in a project creation response. */
export const PublicProjectDatabase = PublicDatabase.omit({ project: true }).extend(publicCreationFields);
export type PublicProjectDatabase = z.infer<typeof PublicProjectDatabase>;

export const PublicProject = Project.extend({ createdAt: DateTime, defaultRegion: z.string().nullable() });
export type PublicProject = z.infer<typeof PublicProject>;

export const PublicCreatedProject = PublicProject.extend({ database: PublicProjectDatabase.nullable() });
export type PublicCreatedProject = z.infer<typeof PublicCreatedProject>;

export const PublicBackup = Backup.extend({
  type: Backup.shape.type.optional(),
  backupType: openEnum(z.enum(["full", "incremental", "differential"])),
  status: openEnum(z.enum([...BackupStatus.options, "unknown"])),
  size: Backup.shape.size.optional(),
  createdAt: z.string(),
});
export type PublicBackup = z.infer<typeof PublicBackup>;

/** Backups list; `data` items are read one by one (see `itemsOf`), so this envelope leaves them unparsed. */
export const PublicBackupList = BackupList.extend({
  data: z.array(z.unknown()),
  pagination: BackupList.shape.pagination.extend({ limit: z.number().int().nullable() }),
});

export const PublicErrorBody = ErrorBody.extend({
  error: ErrorBody.shape.error.extend({ hint: z.string().optional() }),
});

/** A list page whose items are read one by one: one item the client cannot read never fails the page. */
export const PublicPageEnvelope = z.object({ data: z.array(z.unknown()), pagination: Pagination });

/** A branch as the operator reads it: what it acts on (id, git name, role), nothing else required. */
export const PublicBranch = z.object({
  id: z.string(),
  gitName: z.string(),
  isDefault: z.boolean(),
  role: openEnum(z.enum(["production", "preview"])),
});
export type PublicBranch = z.infer<typeof PublicBranch>;
