// What a session the service opens inside a tenant's database must not inherit from it. The tenant owns that
// database, so it can `ALTER DATABASE … SET` any user-settable parameter, and every session there starts with those
// values: `default_transaction_read_only = on` or `statement_timeout = 1` made the service's own statements fail,
// `role = <tenant role>` made even a superuser session act as the tenant, and `local_preload_libraries = <missing>`
// refused every new session. Startup options (`-c name=value`) rank above database and role settings, so these win.

/**
 * The `options` startup parameter (libpq `options=`, `PGOPTIONS`, node-pg's `options`) that pins every setting the
 * service relies on. `lockTimeoutMs`: the bound on lock waits (0: none, for pg_dump, which has --lock-wait-timeout).
 */
export function pinnedSessionOptions(lockTimeoutMs: number): string {
  return [
    "role=none",
    "default_transaction_read_only=off",
    "statement_timeout=0",
    `lock_timeout=${Math.trunc(lockTimeoutMs)}`,
    "idle_in_transaction_session_timeout=0",
    "search_path=pg_catalog",
    // Empty: the value has no spaces, so no libpq escaping is needed.
    "local_preload_libraries=",
  ]
    .map((setting) => `-c ${setting}`)
    .join(" ");
}
