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
export type {
  Project,
  CreatedProject,
  Database,
  DatabaseWithCredentials,
  CreatedDatabase,
  Connection,
  CreatedConnection,
  Backup,
  BackupList,
  Page,
  Pagination,
} from "../contract/index.ts";
export { prometheusHooks } from "./prometheus-hooks.ts";
