import { createHash } from "node:crypto";
import type { OwnerReference, Secret } from "../kube/types.ts";

// The connection Secret: fixed keys, optional template keys from fixed variables, labels naming the remote ids,
// a hash of the data so pods can roll on change. Pure functions; the loop decides when to write.

export const labels = {
  managedBy: "app.kubernetes.io/managed-by",
  projectId: "mds.dev/project-id",
  databaseId: "mds.dev/database-id",
  connectionId: "mds.dev/connection-id",
} as const;
export const managedByValue = "mds-operator";
export const managedSecretSelector = `${labels.managedBy}=${managedByValue}`;
export const annotations = {
  dataHash: "mds.dev/data-hash",
  credentialsHash: "mds.dev/credentials-hash",
  restores: "mds.dev/restores",
  externalId: "mds.dev/external-id",
  /** `<Kind>/<name>` of the resource that publishes this Secret (in its namespace): routes Secret events to it. */
  owner: "mds.dev/owner",
  /**
   * Connection ids nobody holds the password of, to revoke once this Secret no longer names them: written with the
   * recovered credentials (one write, so a crash cannot lose the list), cleared when they are revoked.
   */
  revoke: "mds.dev/revoke",
} as const;

/** What a resource's spec says about its connection Secret (the CRD schema: src/resources/common.ts). */
export interface ConnectionSecretSpec {
  name?: string | undefined;
  endpoint?: "pooled" | "direct" | "accelerate" | undefined;
  /** The servicebinding.io Provisioned Service form: Secret type servicebinding.io/postgresql and its keys. */
  serviceBinding?: boolean | undefined;
  /** Scheduled rotation with overlap: durations such as 720h, 1h30m, 45s. */
  rotation?: { every?: string | undefined; gracePeriod?: string | undefined } | undefined;
  template?: Record<string, string> | undefined;
  /** The server's CA from the spec: the Secret carries it (ca.crt) and its URLs verify the server with it. */
  tls?:
    { caCert: string; mountPath?: string | undefined; sslmode?: "verify-full" | "verify-ca" | undefined } | undefined;
  labels?: Record<string, string> | undefined;
  annotations?: Record<string, string> | undefined;
}

export interface Endpoint {
  host: string;
  port: number;
}

/** Everything needed to connect; lives only in memory and in the Secret. */
export interface ConnectionCredentials {
  connectionId: string;
  connectionName: string;
  user: string;
  password: string;
  database: string;
  sslmode: string;
  /**
   * The CA file the service's connection strings name (`sslrootcert`): a path on the service's machine, useful to
   * clients that share it (the embedded stack). Carried into the URLs and PGSSLROOTCERT.
   */
  sslrootcert?: string | undefined;
  direct: Endpoint;
  pooled?: Endpoint | undefined;
  /**
   * The accelerate endpoint's connection string, kept verbatim: the public API's is not a PostgreSQL URL
   * (`prisma+postgres://…?api_key=…`) and cannot be rebuilt from the login.
   */
  accelerateUrl?: string | undefined;
}

/** The Secret type of the servicebinding.io Provisioned Service contract for PostgreSQL. */
export const serviceBindingType = "servicebinding.io/postgresql";

/** Parses a postgresql:// URL of a creation response into its parts. */
export function parseConnectionString(url: string): {
  user: string;
  password: string;
  host: string;
  port: number;
  database: string;
  sslmode: string;
  sslrootcert?: string;
} {
  const u = new URL(url);
  return {
    user: decodeURIComponent(u.username),
    password: decodeURIComponent(u.password),
    host: u.hostname,
    port: u.port === "" ? 5432 : Number(u.port),
    database: decodeURIComponent(u.pathname.replace(/^\//, "")),
    sslmode: u.searchParams.get("sslmode") ?? "prefer",
    ...(u.searchParams.get("sslrootcert") ? { sslrootcert: u.searchParams.get("sslrootcert")! } : {}),
  };
}

export function connectionUrl(c: ConnectionCredentials, endpoint: Endpoint): string {
  const enc = encodeURIComponent;
  const root = c.sslrootcert === undefined ? "" : `&sslrootcert=${enc(c.sslrootcert)}`;
  return `postgresql://${enc(c.user)}:${enc(c.password)}@${endpoint.host}:${endpoint.port}/${enc(c.database)}?sslmode=${enc(c.sslmode)}${root}`;
}

/** The credentials as the Secret's URLs should carry them: with spec.tls, verifying the server with its CA. */
function withTls(c: ConnectionCredentials, spec: ConnectionSecretSpec | undefined): ConnectionCredentials {
  if (spec?.tls === undefined) return c;
  return { ...c, sslmode: spec.tls.sslmode ?? "verify-full", sslrootcert: spec.tls.mountPath ?? defaultCaMountPath };
}

export const defaultCaMountPath = "/etc/mds/ca.crt";
/** The Secret key of the CA (spec.connectionSecret.tls.caCert). */
export const caKey = "ca.crt";

export function secretData(
  service: ConnectionCredentials,
  spec: ConnectionSecretSpec | undefined,
): Record<string, string> {
  const c = withTls(service, spec);
  const directUrl = connectionUrl(c, c.direct);
  const pooledUrl = connectionUrl(c, c.pooled ?? c.direct);
  const endpoint = spec?.endpoint ?? "pooled";
  const vars: Record<string, string> = {
    host: c.direct.host,
    port: String(c.direct.port),
    user: c.user,
    password: c.password,
    database: c.database,
    directUrl,
    pooledUrl,
    accelerateUrl: c.accelerateUrl ?? "",
  };
  const data: Record<string, string> = {};
  for (const [key, template] of Object.entries(spec?.template ?? {})) {
    data[key] = template.replace(/\{\{ *([a-zA-Z]+) *\}\}/g, (_m, v: string) => vars[v] ?? "");
  }
  // The fixed keys win over template keys of the same name. `accelerate` falls back to pooled without one.
  const chosen =
    endpoint === "direct"
      ? directUrl
      : endpoint === "accelerate" && c.accelerateUrl !== undefined
        ? c.accelerateUrl
        : pooledUrl;
  if (spec?.serviceBinding === true) {
    // servicebinding.io's well-known entries; Spring Cloud Bindings and Quarkus read these for PostgreSQL.
    Object.assign(data, {
      type: "postgresql",
      provider: "mds",
      host: c.direct.host,
      port: String(c.direct.port),
      database: c.database,
      username: c.user,
      password: c.password,
      sslmode: c.sslmode,
    });
  }
  if (c.accelerateUrl !== undefined) data["ACCELERATE_URL"] = c.accelerateUrl;
  if (spec?.tls !== undefined) data[caKey] = spec.tls.caCert;
  Object.assign(data, {
    DATABASE_URL: chosen,
    DIRECT_URL: directUrl,
    PGHOST: c.direct.host,
    PGPORT: String(c.direct.port),
    PGUSER: c.user,
    PGPASSWORD: c.password,
    PGDATABASE: c.database,
    PGSSLMODE: c.sslmode,
    ...(c.sslrootcert === undefined ? {} : { PGSSLROOTCERT: c.sslrootcert }),
  });
  return data;
}

export function hashData(data: Record<string, string>): string {
  const h = createHash("sha256");
  for (const key of Object.keys(data).sort()) h.update(`${key}\u0000${data[key]}\u0000`);
  return h.digest("hex");
}

/** Proves the credentials are the operator's; the accelerate URL joins only when there is one (older Secrets hash the same). */
export function credentialsHash(connectionId: string, user: string, password: string, accelerateUrl?: string): string {
  const extra = accelerateUrl === undefined ? "" : `\u0000${accelerateUrl}`;
  return createHash("sha256").update(`${connectionId}\u0000${user}\u0000${password}${extra}`).digest("hex");
}

export function decodeData(secret: Secret): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(secret.data ?? {})) out[k] = Buffer.from(v, "base64").toString("utf8");
  return out;
}

export function encodeData(data: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(data)) out[k] = Buffer.from(v, "utf8").toString("base64");
  return out;
}

/**
 * The credentials the operator itself wrote into this Secret, if they are intact: the credentials hash
 * annotation proves PGUSER/PGPASSWORD are what the operator put there, so an edit of other keys can be undone
 * without minting new credentials.
 */
export function credentialsFromSecret(
  secret: Secret,
  endpoints: { direct: Endpoint; pooled?: Endpoint | undefined },
): ConnectionCredentials | undefined {
  const data = decodeData(secret);
  const connectionId = secret.metadata.labels?.[labels.connectionId];
  const user = data["PGUSER"];
  const password = data["PGPASSWORD"];
  const database = data["PGDATABASE"];
  if (connectionId === undefined || user === undefined || password === undefined || database === undefined)
    return undefined;
  const accelerateUrl = data["ACCELERATE_URL"];
  if (
    secret.metadata.annotations?.[annotations.credentialsHash] !==
    credentialsHash(connectionId, user, password, accelerateUrl)
  )
    return undefined;
  return {
    connectionId,
    connectionName: "",
    user,
    password,
    database,
    // Written with spec.tls, PGSSLMODE/PGSSLROOTCERT are the spec's (the service's own sslrootcert, a path on its
    // machine, is not kept): without it again, TLS stays required.
    ...(data[caKey] !== undefined
      ? { sslmode: "require" }
      : {
          sslmode: data["PGSSLMODE"] ?? "prefer",
          ...(data["PGSSLROOTCERT"] === undefined ? {} : { sslrootcert: data["PGSSLROOTCERT"] }),
        }),
    direct: endpoints.direct,
    pooled: endpoints.pooled,
    ...(accelerateUrl === undefined ? {} : { accelerateUrl }),
  };
}

export interface SecretInput {
  namespace: string;
  name: string;
  credentials: ConnectionCredentials;
  spec: ConnectionSecretSpec | undefined;
  projectId: string | undefined;
  databaseId: string;
  owner: OwnerReference | undefined;
  /** `<Kind>/<name>` for the mds.dev/owner annotation. */
  ownerName?: string | undefined;
}

/** The spec's extra labels or annotations without mds.dev/ keys: those are the operator's records, never the user's. */
function userKeysOnly(map: Record<string, string> | undefined): Record<string, string> {
  return Object.fromEntries(Object.entries(map ?? {}).filter(([k]) => !k.startsWith("mds.dev/")));
}

export function buildSecret(input: SecretInput): Secret {
  const data = secretData(input.credentials, input.spec);
  const c = input.credentials;
  return {
    apiVersion: "v1",
    kind: "Secret",
    type: input.spec?.serviceBinding === true ? serviceBindingType : "Opaque",
    metadata: {
      name: input.name,
      namespace: input.namespace,
      labels: {
        ...userKeysOnly(input.spec?.labels),
        [labels.managedBy]: managedByValue,
        [labels.databaseId]: input.databaseId,
        [labels.connectionId]: c.connectionId,
        ...(input.projectId === undefined ? {} : { [labels.projectId]: input.projectId }),
      },
      annotations: {
        ...userKeysOnly(input.spec?.annotations),
        ...(input.ownerName === undefined ? {} : { [annotations.owner]: input.ownerName }),
        [annotations.dataHash]: hashData(data),
        [annotations.credentialsHash]: credentialsHash(c.connectionId, c.user, c.password, c.accelerateUrl),
      },
      ...(input.owner === undefined ? {} : { ownerReferences: [input.owner] }),
    },
    data: encodeData(data),
  };
}

/** Whether the Secret in the cluster already is what `desired` describes (ignoring what others may add). */
export function secretUpToDate(current: Secret, desired: Secret): boolean {
  const cm = current.metadata;
  const dm = desired.metadata;
  const sameMap = (a: Record<string, string> | undefined, b: Record<string, string> | undefined) =>
    Object.entries(b ?? {}).every(([k, v]) => a?.[k] === v);
  const sameData =
    Object.keys(current.data ?? {}).length === Object.keys(desired.data ?? {}).length &&
    sameMap(current.data, desired.data);
  const owners = (o: OwnerReference[] | undefined) => (o ?? []).map((r) => r.uid).join(",");
  return (
    (current.type ?? "Opaque") === (desired.type ?? "Opaque") &&
    sameData &&
    sameMap(cm.labels, dm.labels) &&
    sameMap(cm.annotations, dm.annotations) &&
    owners(cm.ownerReferences) === owners(dm.ownerReferences)
  );
}

/** The restore ledger on a Secret: the idempotency keys applied to its database. */
export function restoreKeysOf(secret: Secret | undefined): string[] {
  const raw = secret?.metadata.annotations?.[annotations.restores];
  if (raw === undefined) return [];
  try {
    const parsed: unknown = JSON.parse(raw);
    return Array.isArray(parsed) ? parsed.filter((k): k is string => typeof k === "string") : [];
  } catch {
    return [];
  }
}
