import { randomBytes } from "node:crypto";

// PostgreSQL names of the databases and roles the service makes for tenants. Every tenant can read the catalog
// (pg_database, pg_roles, pg_auth_members, pg_stat_activity: PostgreSQL offers no way to hide them), so a name must
// tell nothing: not an API id (a tenant would learn other tenants' database and connection ids and could aim
// requests, annotations or revocations at them), nothing a client sent. A new name is random and recorded in the
// control database (`databases.pg_name`, `databases.owner_role`, `connections.role_name`); nothing derives a PostgreSQL
// name from an API id.
//
// Databases and logins made before this keep their `mds_<id body>` names: every connection string handed out names
// the database and the login, so a rename would break every live application of those tenants (and renaming a
// database first ends every session in it). Their ids stay readable in the catalog until they are deleted.

/** `mds_` and 24 hex digits (96 random bits). Hex only: never a spare's `mds_spare_…` nor a job login's `mds_job_…`. */
export const newPgName = (): string => `mds_${randomBytes(12).toString("hex")}`;

/** The role that owns a database and everything in it; the database's logins are its members. */
export const ownerRoleOf = (pgName: string): string => `${pgName}_owner`;
