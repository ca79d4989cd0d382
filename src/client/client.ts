// Over 400 lines on purpose: one method per endpoint of the API, each a few lines of path, schema and options; split
// by resource they would repeat the same plumbing in every file.

import type { Dispatcher } from "undici";
import type { z } from "zod";
import {
  CreateBranchBody,
  CreateConnectionBody,
  CreateDatabaseBody,
  CreateProjectBody,
  CreateProjectDatabaseBody,
  dataOf,
  PublicBackup,
  PublicBackupList,
  PublicBranch,
  PublicConnection,
  PublicConnectionRead,
  PublicCreatedConnection,
  PublicCreatedDatabase,
  PublicCreatedProject,
  PublicDatabase,
  PublicDatabaseWithCredentials,
  PublicPageEnvelope,
  PublicProject,
  RestoreBody,
  UpdateDatabaseBody,
  type Page,
} from "../contract/index.ts";
import { createItemReader } from "./list-items.ts";
import { systemClock, type Clock } from "./clock.ts";
import { ContractViolationError, InvalidRequestError } from "./errors.ts";
import type { ClientHooks, ClientLogger } from "./hooks.ts";
import { oauthTokenSource, type OAuthOptions } from "./oauth-token-source.ts";
import { RateBudget, sharedRateBudget, type RateLimitOptions } from "./rate-budget.ts";
import { resolveRetryPolicy, type RetryOptions } from "./retry-policy.ts";
import { tokenFileSource } from "./token-file-source.ts";
import { staticTokenSource, type TokenSource } from "./token-source.ts";
import { createTransport, type Call, type CallOptions } from "./transport.ts";

export interface ClientOptions {
  /** Where the service is, e.g. `https://mds.example.com` (paths start with `/v1`). */
  baseUrl: string;
  /** Exactly one of `token`, `tokenFile`, `oauth`. */
  token?: string;
  /** A file holding the token, re-read when it changes (a mounted Secret). */
  tokenFile?: string;
  oauth?: OAuthOptions;
  /** Per attempt, headers and body included. Default 30 s. */
  timeoutMs?: number;
  retry?: RetryOptions;
  /**
   * The budget of the credential, shared by every client of the same credential and base URL
   * in this process (the first client's settings win). `false` turns it off.
   */
  rateLimit?: RateLimitOptions | false;
  /** An explicit budget to share, instead of the per-credential one. */
  rateBudget?: RateBudget;
  /** An undici dispatcher (an Agent with TLS settings, a MockAgent in tests). */
  dispatcher?: Dispatcher;
  hooks?: ClientHooks;
  logger?: ClientLogger;
  /** Injected time, for tests. */
  clock?: Clock;
  /** Injected randomness for the backoff jitter, for tests. Returns [0, 1). */
  random?: () => number;
  userAgent?: string;
}

/** The last argument of every method. */
interface RequestOptions {
  /** Aborts the call at once, waits included. */
  signal?: AbortSignal;
  /** Sent as `Idempotency-Key`; makes a POST safe to retry and replays its first response. */
  idempotencyKey?: string;
}

type CreateProjectInput = z.input<typeof CreateProjectBody>;
type CreateDatabaseInput = z.input<typeof CreateDatabaseBody>;
type CreateProjectDatabaseInput = z.input<typeof CreateProjectDatabaseBody>;
type UpdateDatabaseInput = z.input<typeof UpdateDatabaseBody>;
type RestoreDatabaseInput = z.input<typeof RestoreBody>;
type CreateConnectionInput = z.input<typeof CreateConnectionBody>;

interface ListQuery {
  cursor?: string | undefined;
  /** Page size, 1-100 (service default 100). */
  limit?: number | undefined;
}
interface ListProjectsQuery extends ListQuery {
  logicalId?: string | undefined;
}
interface ListDatabasesQuery extends ListQuery {
  projectId?: string | undefined;
  logicalId?: string | undefined;
}
interface ListBackupsQuery {
  limit?: number | undefined;
}

// What the client returns: every shape the public API may send (src/contract/public-responses.ts); our service
// sends the stricter shapes of src/contract/, which these accept.
type Project = PublicProject;
type CreatedProject = PublicCreatedProject;
type Database = PublicDatabase;
type DatabaseWithCredentials = PublicDatabaseWithCredentials;
type CreatedDatabase = PublicCreatedDatabase;
type Connection = PublicConnection;
type CreatedConnection = PublicCreatedConnection;
type Backup = PublicBackup;
type BackupList = Omit<z.infer<typeof PublicBackupList>, "data"> & { data: Backup[]; skipped?: number };

export interface MdsClient {
  createProject(body: CreateProjectInput, opts?: RequestOptions): Promise<CreatedProject>;
  getProject(id: string, opts?: RequestOptions): Promise<Project>;
  listProjects(query?: ListProjectsQuery, opts?: RequestOptions): Promise<Page<Project>>;
  deleteProject(id: string, opts?: RequestOptions): Promise<void>;
  /** POST /v1/databases: the answer carries connection strings on the endpoints. */
  createDatabase(body: CreateDatabaseInput, opts?: RequestOptions): Promise<DatabaseWithCredentials>;
  /** POST /v1/projects/{id}/databases: the full creation form. */
  createProjectDatabase(
    projectId: string,
    body: CreateProjectDatabaseInput,
    opts?: RequestOptions,
  ): Promise<CreatedDatabase>;
  getDatabase(id: string, opts?: RequestOptions): Promise<Database>;
  updateDatabase(id: string, body: UpdateDatabaseInput, opts?: RequestOptions): Promise<Database>;
  deleteDatabase(id: string, opts?: RequestOptions): Promise<void>;
  restoreDatabase(targetId: string, body: RestoreDatabaseInput, opts?: RequestOptions): Promise<Database>;
  listDatabases(query?: ListDatabasesQuery, opts?: RequestOptions): Promise<Page<Database>>;
  listProjectDatabases(projectId: string, query?: ListQuery, opts?: RequestOptions): Promise<Page<Database>>;
  listBackups(databaseId: string, query?: ListBackupsQuery, opts?: RequestOptions): Promise<BackupList>;
  createBackup(databaseId: string, opts?: RequestOptions): Promise<Backup>;
  /**
   * DELETE /v1/databases/{id}/backups/{backupId}: our service's extension (the public API has no such endpoint and
   * answers 404). A completed or failed manual backup of that database; a repeated call is 404 (`not_found`).
   */
  deleteBackup(databaseId: string, backupId: string, opts?: RequestOptions): Promise<void>;
  createConnection(databaseId: string, body: CreateConnectionInput, opts?: RequestOptions): Promise<CreatedConnection>;
  listConnections(databaseId: string, opts?: RequestOptions): Promise<Page<Connection>>;
  /**
   * GET /v1/connections/{id}. `openSessions`, the client sessions that use its login now, is our service's extension:
   * absent where the server cannot tell (the public API).
   */
  getConnection(id: string, opts?: RequestOptions): Promise<PublicConnectionRead>;
  deleteConnection(id: string, opts?: RequestOptions): Promise<void>;
  /** POST /v1/projects/{id}/branches: 409 when the project has a live branch of that git name. */
  createBranch(projectId: string, body: CreateBranchBody, opts?: RequestOptions): Promise<PublicBranch>;
  /** GET /v1/projects/{id}/branches (`gitName`: the exact match, at most one). */
  listBranches(
    projectId: string,
    query?: { gitName?: string; limit?: number; cursor?: string },
    opts?: RequestOptions,
  ): Promise<Page<PublicBranch>>;
  /** DELETE /v1/branches/{id}: a soft delete; 422 for the default or production branch, 409 while a database is on it. */
  deleteBranch(id: string, opts?: RequestOptions): Promise<void>;
  /** Every project, page after page (`query.limit` sets the page size). */
  iterateProjects(query?: ListProjectsQuery, opts?: RequestOptions): AsyncIterableIterator<Project>;
  /** Every database matching the query, page after page. */
  iterateDatabases(query?: ListDatabasesQuery, opts?: RequestOptions): AsyncIterableIterator<Database>;
  iterateProjectDatabases(projectId: string, query?: ListQuery, opts?: RequestOptions): AsyncIterableIterator<Database>;
  /**
   * Whether this server has announced that it replays a POST's Idempotency-Key (header `X-Idempotency-Replay`, seen
   * on a response of this base URL). Until then a POST that may have reached the server is never sent again.
   */
  replaysIdempotencyKeys(): boolean;
}

const ProjectEnvelope = dataOf(PublicProject);
const CreatedProjectEnvelope = dataOf(PublicCreatedProject);
const DatabaseEnvelope = dataOf(PublicDatabase);
const DatabaseWithCredentialsEnvelope = dataOf(PublicDatabaseWithCredentials);
const CreatedDatabaseEnvelope = dataOf(PublicCreatedDatabase);
const BackupEnvelope = dataOf(PublicBackup);
const BranchEnvelope = dataOf(PublicBranch);
const CreatedConnectionEnvelope = dataOf(PublicCreatedConnection);
const ConnectionReadEnvelope = dataOf(PublicConnectionRead);

const defaultTimeoutMs = 30_000;

export function createClient(options: ClientOptions): MdsClient {
  const baseUrl = checkBaseUrl(options.baseUrl);
  const clock = options.clock ?? systemClock;
  const timeoutMs = options.timeoutMs ?? defaultTimeoutMs;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0)
    throw new TypeError(`invalid client option timeoutMs: ${String(timeoutMs)}`);
  const tokenSource = chooseTokenSource(options, clock, timeoutMs);
  const budget =
    options.rateBudget ??
    (options.rateLimit === false
      ? undefined
      : sharedRateBudget(`${baseUrl}|${tokenSource.identity}`, options.rateLimit ?? {}, clock));

  const transport = createTransport({
    baseUrl,
    tokenSource,
    dispatcher: options.dispatcher,
    timeoutMs,
    retry: resolveRetryPolicy(options.retry),
    budget,
    clock,
    random: options.random ?? Math.random,
    hooks: options.hooks ?? {},
    logger: options.logger,
    userAgent: options.userAgent ?? "mds-client",
  });

  const send = <T>(call: Call<T>, opts: RequestOptions | undefined): Promise<T> =>
    transport.send(call, callOptions(opts));
  const unwrap = async <T>(call: Call<{ data: T }>, opts: RequestOptions | undefined): Promise<T> =>
    (await send(call, opts)).data;
  const readItems = createItemReader(options.hooks ?? {}, options.logger);
  /** A list call whose items are read one by one (an unreadable one is left out and counted in `skipped`). */
  const listPage = async <T>(
    call: Omit<Call<unknown>, "response">,
    item: z.ZodType<T>,
    opts: RequestOptions | undefined,
  ): Promise<Page<T>> => {
    const page = await send({ ...call, response: { schema: PublicPageEnvelope } }, opts);
    const { data, skipped } = readItems(call.operation, page.data, item);
    return { data, pagination: page.pagination, ...(skipped === 0 ? {} : { skipped }) };
  };
  const ignoreBody = { ignoreBody: undefined };

  const client: MdsClient = {
    async createProject(body, opts) {
      const description = `create project${label(body.name ?? body.logicalId)}`;
      return unwrap(
        {
          operation: "createProject",
          description,
          method: "POST",
          path: "/v1/projects",
          body: checkBody(CreateProjectBody, body, description),
          response: { schema: CreatedProjectEnvelope },
          conflictNamesExisting: { logicalId: body.logicalId },
        },
        opts,
      );
    },
    getProject(id, opts) {
      return unwrap(
        {
          operation: "getProject",
          description: `get project "${id}"`,
          method: "GET",
          path: `/v1/projects/${seg(id)}`,
          response: { schema: ProjectEnvelope },
        },
        opts,
      );
    },
    listProjects(query, opts) {
      return listPage(
        {
          operation: "listProjects",
          description: "list projects",
          method: "GET",
          path: "/v1/projects",
          query: { ...query },
        },
        PublicProject,
        opts,
      );
    },
    deleteProject(id, opts) {
      return send(
        {
          operation: "deleteProject",
          description: `delete project "${id}"`,
          method: "DELETE",
          path: `/v1/projects/${seg(id)}`,
          response: ignoreBody,
        },
        opts,
      );
    },
    async createDatabase(body, opts) {
      const description = `create database${label(body.name ?? body.logicalId)} in project "${body.projectId}"`;
      return unwrap(
        {
          operation: "createDatabase",
          description,
          method: "POST",
          path: "/v1/databases",
          body: checkBody(CreateDatabaseBody, body, description),
          response: { schema: DatabaseWithCredentialsEnvelope },
          conflictNamesExisting: { logicalId: body.logicalId },
        },
        opts,
      );
    },
    async createProjectDatabase(projectId, body, opts) {
      const description = `create database${label(body.name ?? body.logicalId)} in project "${projectId}"`;
      return unwrap(
        {
          operation: "createProjectDatabase",
          description,
          method: "POST",
          path: `/v1/projects/${seg(projectId)}/databases`,
          body: checkBody(CreateProjectDatabaseBody, body, description),
          response: { schema: CreatedDatabaseEnvelope },
          conflictNamesExisting: { logicalId: body.logicalId },
        },
        opts,
      );
    },
    getDatabase(id, opts) {
      return unwrap(
        {
          operation: "getDatabase",
          description: `get database "${id}"`,
          method: "GET",
          path: `/v1/databases/${seg(id)}`,
          response: { schema: DatabaseEnvelope },
        },
        opts,
      );
    },
    async updateDatabase(id, body, opts) {
      const description = `update database "${id}"`;
      return unwrap(
        {
          operation: "updateDatabase",
          description,
          method: "PATCH",
          path: `/v1/databases/${seg(id)}`,
          body: checkBody(UpdateDatabaseBody, body, description),
          response: { schema: DatabaseEnvelope },
        },
        opts,
      );
    },
    deleteDatabase(id, opts) {
      return send(
        {
          operation: "deleteDatabase",
          description: `delete database "${id}"`,
          method: "DELETE",
          path: `/v1/databases/${seg(id)}`,
          response: ignoreBody,
        },
        opts,
      );
    },
    async restoreDatabase(targetId, body, opts) {
      const description = `restore database "${targetId}"`;
      return unwrap(
        {
          operation: "restoreDatabase",
          description,
          method: "POST",
          path: `/v1/databases/${seg(targetId)}/restore`,
          body: checkBody(RestoreBody, body, description),
          response: { schema: DatabaseEnvelope },
        },
        opts,
      );
    },
    listDatabases(query, opts) {
      return listPage(
        {
          operation: "listDatabases",
          description: "list databases",
          method: "GET",
          path: "/v1/databases",
          query: { ...query },
        },
        PublicDatabase,
        opts,
      );
    },
    listProjectDatabases(projectId, query, opts) {
      return listPage(
        {
          operation: "listProjectDatabases",
          description: `list databases of project "${projectId}"`,
          method: "GET",
          path: `/v1/projects/${seg(projectId)}/databases`,
          query: { ...query },
        },
        PublicDatabase,
        opts,
      );
    },
    async createBranch(projectId, body, opts) {
      const description = `create branch${label(body.gitName)} in project "${projectId}"`;
      return unwrap(
        {
          operation: "createBranch",
          description,
          method: "POST",
          path: `/v1/projects/${seg(projectId)}/branches`,
          body: checkBody(CreateBranchBody, body, description),
          response: { schema: BranchEnvelope },
        },
        opts,
      );
    },
    listBranches(projectId, query, opts) {
      return listPage(
        {
          operation: "listBranches",
          description: `list branches of project "${projectId}"`,
          method: "GET",
          path: `/v1/projects/${seg(projectId)}/branches`,
          query: { ...query },
        },
        PublicBranch,
        opts,
      );
    },
    deleteBranch(id, opts) {
      return send(
        {
          operation: "deleteBranch",
          description: `delete branch "${id}"`,
          method: "DELETE",
          path: `/v1/branches/${seg(id)}`,
          response: ignoreBody,
        },
        opts,
      );
    },
    async listBackups(databaseId, query, opts) {
      const list = await send(
        {
          operation: "listBackups",
          description: `list backups of database "${databaseId}"`,
          method: "GET",
          path: `/v1/databases/${seg(databaseId)}/backups`,
          query: { ...query },
          response: { schema: PublicBackupList },
        },
        opts,
      );
      const { data, skipped } = readItems("listBackups", list.data, PublicBackup);
      return { ...list, data, ...(skipped === 0 ? {} : { skipped }) };
    },
    createBackup(databaseId, opts) {
      return unwrap(
        {
          operation: "createBackup",
          description: `create a backup of database "${databaseId}"`,
          method: "POST",
          path: `/v1/databases/${seg(databaseId)}/backups`,
          body: {},
          response: { schema: BackupEnvelope },
        },
        opts,
      );
    },
    deleteBackup(databaseId, backupId, opts) {
      return send(
        {
          operation: "deleteBackup",
          description: `delete backup "${backupId}" of database "${databaseId}"`,
          method: "DELETE",
          path: `/v1/databases/${seg(databaseId)}/backups/${seg(backupId)}`,
          response: ignoreBody,
        },
        opts,
      );
    },
    async createConnection(databaseId, body, opts) {
      const description = `create connection${label(body.name)} for database "${databaseId}"`;
      return unwrap(
        {
          operation: "createConnection",
          description,
          method: "POST",
          path: `/v1/databases/${seg(databaseId)}/connections`,
          body: checkBody(CreateConnectionBody, body, description),
          response: { schema: CreatedConnectionEnvelope },
        },
        opts,
      );
    },
    listConnections(databaseId, opts) {
      return listPage(
        {
          operation: "listConnections",
          description: `list connections of database "${databaseId}"`,
          method: "GET",
          path: `/v1/databases/${seg(databaseId)}/connections`,
        },
        PublicConnection,
        opts,
      );
    },
    getConnection(id, opts) {
      return unwrap(
        {
          operation: "getConnection",
          description: `get connection "${id}"`,
          method: "GET",
          path: `/v1/connections/${seg(id)}`,
          response: { schema: ConnectionReadEnvelope },
        },
        opts,
      );
    },
    deleteConnection(id, opts) {
      return send(
        {
          operation: "deleteConnection",
          description: `delete connection "${id}"`,
          method: "DELETE",
          path: `/v1/connections/${seg(id)}`,
          response: ignoreBody,
        },
        opts,
      );
    },
    iterateProjects(query, opts) {
      return walkPages("list projects", query?.cursor, (cursor) =>
        client.listProjects(withCursor(query, cursor), opts),
      );
    },
    iterateDatabases(query, opts) {
      return walkPages("list databases", query?.cursor, (cursor) =>
        client.listDatabases(withCursor(query, cursor), opts),
      );
    },
    iterateProjectDatabases(projectId, query, opts) {
      return walkPages(`list databases of project "${projectId}"`, query?.cursor, (cursor) =>
        client.listProjectDatabases(projectId, withCursor(query, cursor), opts),
      );
    },
    replaysIdempotencyKeys: () => transport.replaysIdempotencyKeys(),
  };
  return client;
}

function withCursor<Q extends ListQuery>(query: Q | undefined, cursor: string | undefined): Q | ListQuery {
  return query === undefined ? { cursor } : { ...query, cursor };
}

async function* walkPages<T>(
  description: string,
  firstCursor: string | undefined,
  fetchPage: (cursor: string | undefined) => Promise<Page<T>>,
): AsyncIterableIterator<T> {
  const seen = new Set<string>();
  let next = firstCursor;
  for (;;) {
    const page = await fetchPage(next);
    yield* page.data;
    if (!page.pagination.hasMore) return;
    const cursor = page.pagination.nextCursor;
    // A service that loops or forgets the cursor would make this walk endless.
    if (cursor === null || cursor === "" || seen.has(cursor)) {
      throw new ContractViolationError(
        `cannot ${description}: contract_violation: hasMore is true but nextCursor is ${cursor === null || cursor === "" ? "missing" : "repeated"}`,
        {
          code: "contract_violation",
        },
      );
    }
    seen.add(cursor);
    next = cursor;
  }
}

function chooseTokenSource(options: ClientOptions, clock: Clock, timeoutMs: number): TokenSource {
  const given = [options.token !== undefined, options.tokenFile !== undefined, options.oauth !== undefined].filter(
    Boolean,
  ).length;
  if (given !== 1) throw new TypeError("invalid client options: give exactly one of token, tokenFile, oauth");
  if (options.token !== undefined) {
    // A token read from a Secret often ends with a newline: surrounding whitespace is dropped.
    const token = options.token.trim();
    if (token === "" || /\s/.test(token))
      throw new TypeError("invalid client option token: must be non-empty without whitespace");
    return staticTokenSource(token);
  }
  if (options.tokenFile !== undefined) {
    if (options.tokenFile === "") throw new TypeError("invalid client option tokenFile: must be a path");
    return tokenFileSource(options.tokenFile);
  }
  const oauth = options.oauth;
  if (oauth === undefined) throw new TypeError("invalid client options: give exactly one of token, tokenFile, oauth");
  checkUrl(oauth.tokenUrl, "oauth.tokenUrl");
  if (oauth.refreshToken === "") throw new TypeError("invalid client option oauth.refreshToken: must not be empty");
  return oauthTokenSource(oauth, { dispatcher: options.dispatcher, clock, timeoutMs });
}

function checkBaseUrl(value: string): string {
  checkUrl(value, "baseUrl");
  return value.replace(/\/+$/, "");
}

function checkUrl(value: string, option: string): void {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new TypeError(`invalid client option ${option}: not a URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw new TypeError(`invalid client option ${option}: must be http or https`);
  if (url.username !== "" || url.password !== "")
    throw new TypeError(`invalid client option ${option}: must not carry credentials`);
}

/** Bad input fails here, before any request, with the field named (and no value quoted). */
function checkBody<S extends z.ZodType>(schema: S, body: unknown, description: string): unknown {
  const parsed = schema.safeParse(body);
  if (parsed.success) return body;
  const detail = parsed.error.issues
    .slice(0, 3)
    .map((issue) => `${issue.path.length === 0 ? "body" : issue.path.join(".")}: ${issue.message}`)
    .join("; ");
  throw new InvalidRequestError(`cannot ${description}: invalid_request: ${detail}`, {
    code: "invalid_request",
    cause: parsed.error,
  });
}

function callOptions(opts: RequestOptions | undefined): CallOptions {
  return { signal: opts?.signal, idempotencyKey: opts?.idempotencyKey };
}

function label(name: string | undefined): string {
  return name === undefined ? "" : ` "${name}"`;
}

function seg(id: string): string {
  return encodeURIComponent(id);
}
