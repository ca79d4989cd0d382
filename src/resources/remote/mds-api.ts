import type {
  CreateDatabaseBody,
  CreateProjectBody,
  ListDatabasesParams,
  ListProjectsParams,
  Page,
  PublicBackup,
  PublicBranch,
  PublicConnectionRead,
  PublicCreatedConnection,
  PublicCreatedProject,
  PublicDatabase,
  PublicDatabaseWithCredentials,
  PublicProject,
  RestoreBody,
  UpdateDatabaseBody,
} from "../../contract/index.ts";
import type { CallOptions, ConnectionApi } from "../../operator/api.ts";

// Every remote call of every kind (the mirror uses the list calls). A kind that calls something new adds the method
// here, and to test/support/fake-api.ts, which implements exactly this. Responses have the shapes the public API may
// send (src/contract/public-responses.ts), of which our service's are a part.

export interface MdsApi extends ConnectionApi {
  /** The wire contract's shapes, of which the Secret component's (ConnectionApi) are a part. */
  createConnection(databaseId: string, body: { name: string }, options?: CallOptions): Promise<PublicCreatedConnection>;
  getDatabase(id: string, options?: CallOptions): Promise<PublicDatabase>;
  getConnection(id: string, options?: CallOptions): Promise<PublicConnectionRead>;
  createProject(body: CreateProjectBody, options?: CallOptions): Promise<PublicCreatedProject>;
  getProject(id: string, options?: CallOptions): Promise<PublicProject>;
  listProjects(params?: ListProjectsParams, options?: CallOptions): Promise<Page<PublicProject>>;
  deleteProject(id: string, options?: CallOptions): Promise<void>;
  /** POST /v1/databases: the endpoint that takes `logicalId` in the public API too. */
  createDatabase(body: CreateDatabaseBody, options?: CallOptions): Promise<PublicDatabaseWithCredentials>;
  updateDatabase(id: string, body: UpdateDatabaseBody, options?: CallOptions): Promise<PublicDatabase>;
  deleteDatabase(id: string, options?: CallOptions): Promise<void>;
  restoreDatabase(id: string, body: RestoreBody, options?: CallOptions): Promise<PublicDatabase>;
  listDatabases(params?: ListDatabasesParams, options?: CallOptions): Promise<Page<PublicDatabase>>;
  listBackups(
    databaseId: string,
    params?: { limit?: number },
    options?: CallOptions,
  ): Promise<{ data: PublicBackup[] }>;
  /** Branches (spec.branch of a Database): found by git name, created, and soft-deleted with their last database. */
  createBranch(projectId: string, body: { gitName: string }, options?: CallOptions): Promise<PublicBranch>;
  listBranches(
    projectId: string,
    params?: { gitName?: string; limit?: number },
    options?: CallOptions,
  ): Promise<Page<PublicBranch>>;
  deleteBranch(id: string, options?: CallOptions): Promise<void>;
  /** POST /v1/databases/{id}/backups: our service's extension; the public API has no such endpoint (404). */
  createBackup(databaseId: string, options?: CallOptions): Promise<PublicBackup>;
  /** DELETE /v1/databases/{id}/backups/{backupId}: our service's extension (404 for another database's backup). */
  deleteBackup(databaseId: string, backupId: string, options?: CallOptions): Promise<void>;
}
