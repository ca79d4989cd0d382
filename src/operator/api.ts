import type {
  BackupList,
  CreateProjectBody,
  CreateProjectDatabaseBody,
  CreatedConnection,
  CreatedDatabase,
  CreatedProject,
  Database,
  ListDatabasesParams,
  ListProjectsParams,
  Page,
  Project,
  RestoreBody,
  UpdateDatabaseBody,
} from "../contract/index.ts";

// The part of the service client (src/client) the operator uses. Unit tests pass a fake of exactly this.
export interface CallOptions {
  signal?: AbortSignal;
  idempotencyKey?: string;
}

export interface MdsApi {
  createProject(body: CreateProjectBody, options?: CallOptions): Promise<CreatedProject>;
  getProject(id: string, options?: CallOptions): Promise<Project>;
  listProjects(params?: ListProjectsParams, options?: CallOptions): Promise<Page<Project>>;
  deleteProject(id: string, options?: CallOptions): Promise<void>;
  createProjectDatabase(projectId: string, body: CreateProjectDatabaseBody, options?: CallOptions): Promise<CreatedDatabase>;
  getDatabase(id: string, options?: CallOptions): Promise<Database>;
  updateDatabase(id: string, body: UpdateDatabaseBody, options?: CallOptions): Promise<Database>;
  deleteDatabase(id: string, options?: CallOptions): Promise<void>;
  restoreDatabase(id: string, body: RestoreBody, options?: CallOptions): Promise<Database>;
  listDatabases(params?: ListDatabasesParams, options?: CallOptions): Promise<Page<Database>>;
  listBackups(databaseId: string, params?: { limit?: number }, options?: CallOptions): Promise<BackupList>;
  createConnection(databaseId: string, body: { name: string }, options?: CallOptions): Promise<CreatedConnection>;
  deleteConnection(id: string, options?: CallOptions): Promise<void>;
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
