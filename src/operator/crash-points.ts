// The named points where a test may simulate a crash (OperatorOptions.crashPoint; off in production). Each sits
// between two writes whose order the crash-safety argument depends on.
export const crashPoints = [
  "project:after-create", // POST /v1/projects answered; Secret not yet written
  "project:after-secret", // Secret written; external-id annotation and status not yet
  "database:after-create", // POST .../databases answered; Secret not yet written
  "database:after-secret",
  "database:after-update", // remote PATCH answered; status not yet (Project has no remote update)
  "project:after-recover", // Secret rebuild: credentials replayed or a connection minted; Secret not yet written
  "project:before-revoke", // rebuilt Secret written; the connection whose password was lost not yet revoked
  "database:after-recover",
  "database:before-revoke",
  "project:after-delete", // remote DELETE done (deletionPolicy Delete); Secret not yet deleted
  "project:before-finalizer-drop", // Secret deleted or released; finalizer not yet removed
  "database:after-delete",
  "database:before-finalizer-drop",
  "project:after-rotate-mint", // rotation: a new connection minted (status.rotation.pending recorded); Secret not yet
  "project:after-rotate-secret", // rotated Secret written; status does not name the new connection nor the retiring one
  "project:before-retire", // a retiring connection's grace period ended; not yet revoked
  "database:after-rotate-mint",
  "database:after-rotate-secret",
  "database:before-retire",
  "connection:after-create", // a Connection's first mint answered; Secret not yet written
  "connection:after-secret",
  "connection:after-recover",
  "connection:before-revoke",
  "connection:after-rotate-mint",
  "connection:after-rotate-secret",
  "connection:before-retire",
  "connection:after-delete", // connections revoked (deletionPolicy Delete); Secret not yet deleted
  "connection:before-finalizer-drop",
  "restore:before-post", // requestedAt and ledger written; restore not yet requested
  "restore:after-post", // restore requested; outcome not yet followed
  "backup:before-post", // DatabaseBackup: requestedAt written; backup not yet requested
  "backup:after-post", // backup requested and answered; its id not yet in status
] as const;
export type CrashPoint = (typeof crashPoints)[number];
