import { createHash } from "node:crypto";
import type { OwnerReference, Secret } from "../../kube/types.ts";
import { connectionUrl, credentialsHash, type ConnectionCredentials, type Endpoint } from "./connection-credentials.ts";
import type { ConnectionSecretSpec } from "./spec.ts";

// The connection Secret rendered from credentials and the spec: fixed keys, optional template keys from fixed
// variables (spec.ts lists them), labels naming the remote ids, a hash of the data so pods can roll on change; and
// read back: the credentials the operator itself wrote. Pure functions; publisher.ts decides when to write.

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
  /** `<Kind>/<name>` of the resource that publishes this Secret (in its namespace): routes Secret events to it. */
  owner: "mds.dev/owner",
  /**
   * Connection ids nobody holds the password of, to revoke once this Secret no longer names them: written with the
   * recovered credentials (one write, so a crash cannot lose the list), cleared when they are revoked.
   */
  revoke: "mds.dev/revoke",
} as const;

/**
 * The keys of the connection Secret whose values are secrets: the password, and every URL that carries it (or, for
 * accelerate, the endpoint's own secret). A kind that writes this Secret declares them (its module's `secretKeys`):
 * the operator's log redaction and the tests' planted-secret scan take them from the registry. Template keys are
 * named by the user and may hold them too; they are never logged, as no Secret data is.
 */
export const connectionSecretKeys = ["PGPASSWORD", "DATABASE_URL", "DIRECT_URL", "ACCELERATE_URL", "password"] as const;

/** The Secret type of the servicebinding.io Provisioned Service contract for PostgreSQL. */
export const serviceBindingType = "servicebinding.io/postgresql";

/** The credentials as the Secret's URLs should carry them: with spec.tls, verifying the server with its CA. */
function withTls(c: ConnectionCredentials, spec: ConnectionSecretSpec | undefined): ConnectionCredentials {
  if (spec?.tls === undefined) return c;
  return { ...c, sslmode: spec.tls.sslmode ?? "verify-full", sslrootcert: spec.tls.mountPath ?? defaultCaMountPath };
}

const defaultCaMountPath = "/etc/mds/ca.crt";
/** The Secret key of the CA (spec.connectionSecret.tls.caCert). */
const caKey = "ca.crt";

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

function hashData(data: Record<string, string>): string {
  const h = createHash("sha256");
  for (const key of Object.keys(data).sort()) h.update(`${key}\u0000${data[key]}\u0000`);
  return h.digest("hex");
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

interface SecretInput {
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
