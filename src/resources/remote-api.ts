import type {
  CreateDatabaseBody,
  CreateProjectBody,
  ListDatabasesParams,
  ListProjectsParams,
  Page,
  PublicBackup,
  PublicCreatedProject,
  PublicDatabase,
  PublicDatabaseWithCredentials,
  PublicProject,
  RestoreBody,
  UpdateDatabaseBody,
} from "../contract/index.ts";
import { createClient, type ClientOptions } from "../client/index.ts";
import type { CallOptions, ConnectionApi } from "../operator/api.ts";
import type { ApiContext, RemoteDefinition } from "../operator/credentials.ts";
import type { ControllerContext } from "../operator/controller.ts";
import { createRemoteMirror, type RemoteMirror } from "./remote-mirror.ts";

// The service as the kinds call it: every remote call of every kind, the one client (src/client) that makes them,
// which of them write (refused by a replica that is not the leader) and the per-credential mirror the kinds share.
// src/operator builds one client and one mirror per credential from `mdsRemote` without knowing their methods. A kind
// that calls something new adds the method here (and to test/support/fake-api.ts, which implements exactly this).
// Responses have the shapes the public API may send (src/contract/public-responses.ts), of which our service's are
// a part.

export type { CallOptions } from "../operator/api.ts";

export interface MdsApi extends ConnectionApi {
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
}

/** What one credential gives the kinds: its client and its mirror (src/operator/credentials.ts builds both). */
export interface MdsRemote {
  api: MdsApi;
  mirror: RemoteMirror;
}

/** A credential's context as the kinds see it. */
export type MdsApiContext = ApiContext<MdsRemote>;

/** What a kind's controller code may use (src/operator/controller.ts), with this remote. */
export type MdsControllerContext = ControllerContext<MdsRemote>;

/** The remote as src/operator builds it per credential. */
export const mdsRemote: RemoteDefinition<MdsRemote> = {
  client: (options: ClientOptions) => createClient(options),
  writes: [
    "createProject",
    "deleteProject",
    "createDatabase",
    "updateDatabase",
    "deleteDatabase",
    "restoreDatabase",
    "createConnection",
    "deleteConnection",
  ],
  mirror: createRemoteMirror,
};
