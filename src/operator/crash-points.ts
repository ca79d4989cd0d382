// The named points where a test may simulate a crash (OperatorOptions.crashPoint; off in production). Each sits
// between two writes whose order the crash-safety argument depends on.
export const crashPoints = [
  "project:after-create", // POST /v1/projects answered; Secret not yet written
  "project:after-secret", // Secret written; external-id annotation and status not yet
  "database:after-create", // POST .../databases answered; Secret not yet written
  "database:after-secret",
  "restore:before-post", // requestedAt and ledger written; restore not yet requested
  "restore:after-post", // restore requested; outcome not yet followed
] as const;
export type CrashPoint = (typeof crashPoints)[number];
