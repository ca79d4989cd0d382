// The API client of the Managed Database Service: the one way the rest of mds talks to it.
export { createClient } from "./client.ts";
export type {
  ClientOptions,
  MdsClient,
  RequestOptions,
  CreateProjectInput,
  CreateDatabaseInput,
  CreateProjectDatabaseInput,
  UpdateDatabaseInput,
  RestoreDatabaseInput,
  CreateConnectionInput,
  ListQuery,
  ListProjectsQuery,
  ListDatabasesQuery,
  ListBackupsQuery,
} from "./client.ts";
export * from "./errors.ts";
export type { ClientHooks, ClientLogger, AttemptEvent, RequestEvent, ThrottleEvent, RetryEvent } from "./hooks.ts";
export type { OAuthOptions } from "./oauth-token-source.ts";
export { RateBudget, defaultRateLimit, type RateLimitOptions } from "./rate-budget.ts";
export { defaultRetryPolicy, type RetryOptions } from "./retry-policy.ts";
export { parseRetryAfter } from "./retry-after.ts";
export { systemClock, type Clock } from "./clock.ts";
// What the client returns: the shapes the public API may send (our service's stricter ones included).
export type {
  PublicProject as Project,
  PublicCreatedProject as CreatedProject,
  PublicDatabase as Database,
  PublicDatabaseWithCredentials as DatabaseWithCredentials,
  PublicCreatedDatabase as CreatedDatabase,
  PublicConnection as Connection,
  PublicCreatedConnection as CreatedConnection,
  PublicBackup as Backup,
  Page,
  Pagination,
} from "../contract/index.ts";
export type { BackupList } from "./client.ts";
export { prometheusHooks } from "./prometheus-hooks.ts";
