import pino, { type DestinationStream, type Logger } from "pino";

/**
 * Paths that could carry a secret if someone ever logged the object holding them. The code never logs tokens,
 * passwords or connection strings; this is the second line of defence (tests plant secrets and scan all output).
 */
const redactPaths = [
  "req.headers.authorization",
  "headers.authorization",
  "authorization",
  "password",
  "*.password",
  "pass",
  "*.pass",
  "token",
  "*.token",
  "connectionString",
  "*.connectionString",
  "adminUrl",
  "*.adminUrl",
  "controlUrl",
  "*.controlUrl",
  "databaseUrl",
  "*.databaseUrl",
];

export function createServiceLogger(level = "info", destination?: DestinationStream): Logger {
  const options = { level, redact: { paths: redactPaths, censor: "[redacted]" }, base: { service: "mds" } };
  return destination ? pino(options, destination) : pino(options);
}
