import type {
  CreateDatabaseBody,
  CreateProjectBody,
  ListDatabasesParams,
  ListProjectsParams,
  Page,
  PublicBackup,
  PublicConnection,
  PublicCreatedConnection,
  PublicCreatedProject,
  PublicDatabase,
  PublicDatabaseWithCredentials,
  PublicProject,
  RestoreBody,
  UpdateDatabaseBody,
} from "../contract/index.ts";

// The part of the service client (src/client) the operator uses. Unit tests pass a fake of exactly this. Responses
// have the shapes the public API may send (src/contract/public-responses.ts), of which our service's are a part.
export interface CallOptions {
  signal?: AbortSignal;
  idempotencyKey?: string;
}

export type Project = PublicProject;
export type Database = PublicDatabase;
export type Connection = PublicConnection;
export type CreatedConnection = PublicCreatedConnection;

export interface MdsApi {
  createProject(body: CreateProjectBody, options?: CallOptions): Promise<PublicCreatedProject>;
  getProject(id: string, options?: CallOptions): Promise<Project>;
  listProjects(params?: ListProjectsParams, options?: CallOptions): Promise<Page<Project>>;
  deleteProject(id: string, options?: CallOptions): Promise<void>;
  /** POST /v1/databases: the endpoint that takes `logicalId` in the public API too. */
  createDatabase(body: CreateDatabaseBody, options?: CallOptions): Promise<PublicDatabaseWithCredentials>;
  getDatabase(id: string, options?: CallOptions): Promise<Database>;
  updateDatabase(id: string, body: UpdateDatabaseBody, options?: CallOptions): Promise<Database>;
  deleteDatabase(id: string, options?: CallOptions): Promise<void>;
  restoreDatabase(id: string, body: RestoreBody, options?: CallOptions): Promise<Database>;
  listDatabases(params?: ListDatabasesParams, options?: CallOptions): Promise<Page<Database>>;
  listBackups(
    databaseId: string,
    params?: { limit?: number },
    options?: CallOptions,
  ): Promise<{ data: PublicBackup[] }>;
  /** POST /v1/databases/{id}/backups: our service's extension; the public API has no such endpoint (404). */
  createBackup(databaseId: string, options?: CallOptions): Promise<PublicBackup>;
  /** DELETE /v1/databases/{id}/backups/{backupId}: our service's extension (404 for another database's backup). */
  deleteBackup(databaseId: string, backupId: string, options?: CallOptions): Promise<void>;
  createConnection(databaseId: string, body: { name: string }, options?: CallOptions): Promise<CreatedConnection>;
  deleteConnection(id: string, options?: CallOptions): Promise<void>;
  /** Whether the server has announced that it replays Idempotency-Keys: only then may a POST be sent again. */
  replaysIdempotencyKeys(): boolean;
}

/** Builds the client of one credential (one rate budget per credential). */
export type CreateApiClient = (options: { baseUrl: string; token: string }) => MdsApi;

export function errorCode(err: unknown): string | undefined {
  if (typeof err !== "object" || err === null) return undefined;
  const code = (err as { code?: unknown }).code;
  return typeof code === "string" ? code : undefined;
}
export const isApiNotFound = (err: unknown) => errorCode(err) === "not_found";
export const isApiConflict = (err: unknown) => errorCode(err) === "conflict";

/** A failure after which a POST may still have acted: anything but a refusal the service answered (a 4xx). */
export function mayHaveLanded(err: unknown): boolean {
  const status = (err as { status?: unknown } | undefined)?.status;
  return typeof status !== "number" || status >= 500;
}
