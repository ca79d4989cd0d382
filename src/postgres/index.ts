// Finding and running PostgreSQL binaries for the service, `mds dev` and tests.
export { findPostgresBinaries, requiredPrograms, type PostgresBinaries, type FindOptions } from "./find-binaries.ts";
export {
  startPostgres,
  findFreePort,
  templateCluster,
  type StartPostgresOptions,
  type RunningPostgres,
} from "./start-postgres.ts";
export { PostgresError, PostgresNotFoundError } from "./errors.ts";
export { postgresOsUser, type OsUser } from "./os-user.ts";
export { ensureServerTls, type ServerTls } from "./tls.ts";
export {
  findPgBouncer,
  keepsPreparedStatements,
  startPgBouncer,
  grantPoolerConnect,
  endPooledSessions,
  preparePoolerAuth,
  poolerRole,
  type PgBouncerBinary,
  type RunningPgBouncer,
  type StartPgBouncerOptions,
} from "./pgbouncer.ts";
export { pinnedSessionOptions } from "./session-options.ts";
