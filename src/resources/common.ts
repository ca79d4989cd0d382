import { z } from "zod";

// Pieces shared by the three kinds. Every field carries a description: it is what `kubectl explain` shows.

// The service's regions (src/contract/, Region). Kept here, not imported from the wire contract, because the CRD is a
// user-facing API of its own: a new service region must be a deliberate CRD change, not a silent one.
export const Region = z
  .enum(["us-east-1", "us-west-1", "eu-west-3", "eu-central-1", "ap-northeast-1", "ap-southeast-1"])
  .describe("A region of the service.");
export type Region = z.infer<typeof Region>;

export const DeletionPolicy = z
  .enum(["Retain", "Delete"])
  .default("Retain")
  .describe(
    "What happens to the remote object when this resource is deleted. Retain (default) keeps it and the connection " +
      "Secret (released from garbage collection, remote ids in its labels) so a re-applied resource adopts both; " +
      "Delete removes the remote object and then the Secret.",
  );
export type DeletionPolicy = z.infer<typeof DeletionPolicy>;

// Kubernetes object names (DNS subdomain) and Secret data keys.
const objectName = z
  .string()
  .min(1)
  .max(253)
  .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/);
const secretKey = z
  .string()
  .min(1)
  .max(253)
  .regex(/^[-._a-zA-Z0-9]+$/);

export const LocalObjectReference = z
  .object({ name: objectName.describe("Name of the object in the same namespace.") })
  .describe("A reference to an object in the same namespace.");
export type LocalObjectReference = z.infer<typeof LocalObjectReference>;

export const CredentialsSecretRef = z
  .object({
    name: objectName.describe("Name of a Secret in the same namespace that holds the service API token."),
    key: secretKey.default("token").describe("Key of the token in the Secret's data. Defaults to token."),
  })
  .describe("A Secret in the same namespace holding the API token.");

export const Credentials = z
  .object({ secretRef: CredentialsSecretRef })
  .describe(
    "The API token to talk to the service with. When omitted: the namespace's own Secret mds-credentials (key " +
      "token) if it exists, else the operator's default credentials Secret (flag --credentials-secret of mds " +
      "operator) where the operator lets this namespace use it (flag --credentials-fallback-namespaces).",
  );
export type Credentials = z.infer<typeof Credentials>;

// The variables a template may use: plain substitution, no code is evaluated.
export const templateVariables = [
  "host",
  "port",
  "user",
  "password",
  "database",
  "directUrl",
  "pooledUrl",
  "accelerateUrl",
] as const;
const templateValue = z
  .string()
  .max(4096)
  .regex(new RegExp(`^([^{}]|\\{\\{ *(${templateVariables.join("|")}) *\\}\\})*$`), {
    message: `a template value may use only the variables ${templateVariables.map((v) => `{{${v}}}`).join(", ")}`,
  })
  .describe(`A value with {{variable}} placeholders; variables: ${templateVariables.join(", ")}.`);

const stringMap = (what: string) =>
  z
    .record(z.string().min(1).max(317), z.string().max(4096).describe(`Value of one of the ${what}.`))
    .refine((m) => Object.keys(m).length <= 64, { message: `at most 64 ${what}` })
    .meta({ maxProperties: 64 });

// The Secret's mds.dev/ labels and annotations are the operator's records (the ids it holds, what to revoke, the
// restore ledger): a spec must not set them, or anyone who can write the resource could steer what the operator does
// with another namespace's token. The apiserver refuses them (CEL); the operator's parse refuses them too.
export const operatorKeyPrefix = "mds.dev/";
export const operatorKeysMessage = `mds.dev/ keys are the operator's: remove them from connectionSecret.labels and connectionSecret.annotations`;
const secretMetadataMap = (what: string) =>
  stringMap(what)
    .refine((m) => Object.keys(m).every((k) => !k.startsWith(operatorKeyPrefix)), { message: operatorKeysMessage })
    .meta({
      maxProperties: 64,
      "x-kubernetes-validations": [
        { rule: `self.all(k, !k.startsWith('${operatorKeyPrefix}'))`, message: operatorKeysMessage },
      ],
    });

// A Kubernetes-style duration: 720h, 1h30m, 45s, 500ms (what the operator's parseDuration reads).
const duration = z
  .string()
  .max(32)
  .regex(/^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$/, { message: "a duration such as 720h, 1h30m or 45s" })
  .describe("A duration such as 720h, 1h30m or 45s.");

export const SecretEndpoint = z
  .enum(["pooled", "direct", "accelerate"])
  .default("pooled")
  .describe(
    "Which endpoint DATABASE_URL points at: pooled (default; the pooler when the region has one), direct, or " +
      "accelerate (the connection's accelerate endpoint, ACCELERATE_URL; pooled when the connection has none).",
  );
export type SecretEndpoint = z.infer<typeof SecretEndpoint>;

export const ConnectionSecret = z
  .object({
    name: objectName
      .optional()
      .describe("Name of the Secret the operator writes (same namespace). Defaults to the resource's name. Immutable."),
    endpoint: SecretEndpoint,
    template: z
      .record(secretKey, templateValue)
      .refine((m) => Object.keys(m).length <= 32, { message: "at most 32 template keys" })
      .meta({ maxProperties: 32 })
      .optional()
      .describe(
        "Extra Secret keys built from fixed variables, e.g. JDBC_URL: " +
          "'jdbc:postgresql://{{host}}:{{port}}/{{database}}?sslmode=require'. " +
          `Variables: ${templateVariables.join(", ")}. No code is evaluated.`,
      ),
    serviceBinding: z
      .boolean()
      .default(false)
      .describe(
        "Publish the Secret in the servicebinding.io Provisioned Service form: type servicebinding.io/postgresql with " +
          "the keys type, provider, host, port, database, username, password and sslmode besides the usual ones, so " +
          "Service Binding implementations and framework bindings (Spring Cloud Bindings, Quarkus) consume it unchanged.",
      ),
    rotation: z
      .object({
        every: duration
          .optional()
          .describe(
            "Rotate the credentials this often (e.g. 720h); omitted: only when the mds.dev/rotate annotation changes.",
          ),
        gracePeriod: duration
          .optional()
          .describe(
            "How long the replaced credentials keep working after a rotation (default 10m); then they are revoked.",
          ),
      })
      .optional()
      .describe(
        "Rotation with overlap: a new connection is minted and published to the Secret (its data-hash annotation " +
          "changes, so pods that roll on it pick it up), the old one keeps working for gracePeriod, then it is revoked. " +
          "A new value of the annotation mds.dev/rotate asks for one rotation now.",
      ),
    tls: z
      .object({
        caCert: z
          .string()
          .max(65536)
          .regex(/^\s*-----BEGIN CERTIFICATE-----[\s\S]+-----END CERTIFICATE-----\s*$/, {
            message: "a PEM certificate (-----BEGIN CERTIFICATE----- … -----END CERTIFICATE-----)",
          })
          .describe(
            "The CA that signed the server's certificate, PEM (public, fine in Git). Written to the Secret as ca.crt.",
          ),
        mountPath: z
          .string()
          .max(1024)
          .regex(/^\/[-._/a-zA-Z0-9]+$/, { message: "an absolute file path of letters, digits, '.', '_', '-' and '/'" })
          .default("/etc/mds/ca.crt")
          .describe(
            "Where the app mounts the Secret's ca.crt (default /etc/mds/ca.crt): the URLs' sslrootcert and PGSSLROOTCERT.",
          ),
        sslmode: z
          .enum(["verify-full", "verify-ca"])
          .default("verify-full")
          .describe(
            "verify-full (default): the server's certificate must be signed by caCert and name the host; verify-ca: signed only.",
          ),
      })
      .optional()
      .describe(
        "Verify the server: the Secret carries the CA as ca.crt, and its URLs and PGSSLMODE/PGSSLROOTCERT ask for " +
          "sslmode verify-full with sslrootcert at mountPath. Mount the Secret's ca.crt there (a volume with items).",
      ),
    labels: secretMetadataMap("labels")
      .optional()
      .describe("Extra labels on the Secret; keys under mds.dev/ are the operator's and refused."),
    annotations: secretMetadataMap("annotations")
      .optional()
      .describe(
        "Extra annotations on the Secret, e.g. for tools that copy Secrets across namespaces; keys under mds.dev/ are the operator's and refused.",
      ),
  })
  .describe(
    "The connection Secret: DATABASE_URL, DIRECT_URL, PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE, PGSSLMODE, " +
      "ACCELERATE_URL when the connection has an accelerate endpoint, plus template keys; labelled with the remote " +
      "ids and annotated with a hash of its data.",
  );
export type ConnectionSecret = z.infer<typeof ConnectionSecret>;

export const idPattern = (prefix: string) => new RegExp(`^${prefix}_[a-zA-Z0-9]{8,64}$`);

// Rules that make an optional field immutable once the resource exists: it can be neither added, removed nor changed.
// A rule on the field itself would not see additions or removals, so it sits on the parent object.
export function immutableFields(...fields: string[]): { rule: string; message: string }[] {
  return fields.map((f) => ({
    rule: `has(self.${f}) == has(oldSelf.${f}) && (!has(self.${f}) || self.${f} == oldSelf.${f})`,
    message: `${f} is immutable: it cannot be added, changed or removed after creation`,
  }));
}

export function exactlyOne(a: string, b: string, what: string): { rule: string; message: string } {
  return { rule: `has(self.${a}) != has(self.${b})`, message: `exactly one of ${what} must be set` };
}

// Kubernetes object metadata as the operator reads it; the apiserver owns its validation, so unknown fields pass.
export const ObjectMeta = z.looseObject({
  name: z.string(),
  namespace: z.string().optional(),
  uid: z.string().optional(),
  resourceVersion: z.string().optional(),
  generation: z.number().int().optional(),
  creationTimestamp: z.string().optional(),
  deletionTimestamp: z.string().optional(),
  labels: z.record(z.string(), z.string()).optional(),
  annotations: z.record(z.string(), z.string()).optional(),
  finalizers: z.array(z.string()).optional(),
  ownerReferences: z
    .array(z.looseObject({ apiVersion: z.string(), kind: z.string(), name: z.string(), uid: z.string() }))
    .optional(),
});
export type ObjectMeta = z.infer<typeof ObjectMeta>;

// connectionSecret.name is immutable; written out because has() on a missing parent is an error in CEL.
const secretNameOf = (o: string) =>
  `(has(${o}.connectionSecret) && has(${o}.connectionSecret.name) ? ${o}.connectionSecret.name : '')`;
export const secretNameUnchanged = {
  rule: `${secretNameOf("self")} == ${secretNameOf("oldSelf")}`,
  message: "connectionSecret.name is immutable: create a new resource to use another Secret",
};

/** status.binding of the servicebinding.io Provisioned Service contract: the Secret a binding should project. */
export const Binding = z
  .object({ name: z.string().max(253).describe("Name of the connection Secret.") })
  .describe("The servicebinding.io Provisioned Service binding: the name of the Secret with the credentials.");

const time = z.iso.datetime();
/** status.rotation: where the Secret's credentials are in their rotation (src/operator/rotation.ts). */
export const RotationStatus = z
  .object({
    lastRotationTime: time.optional().describe("When the credentials were last rotated."),
    nextRotationTime: time
      .optional()
      .describe("When the next scheduled rotation is due (rotation.every, spread by up to 10 %)."),
    trigger: z.string().max(253).optional().describe("The last value of the mds.dev/rotate annotation acted on."),
    pending: z
      .object({
        suffix: z.string().max(32).describe("Suffix of the connection name the rotation mints under."),
        since: time.describe("When the rotation started."),
        trigger: z.string().max(253).optional().describe("The annotation value that asked for it, if any."),
        replaces: z
          .string()
          .max(80)
          .describe("The connection the Secret held when it started: the one being replaced."),
      })
      .optional()
      .describe("A rotation in progress (recorded before its connection is minted)."),
    retiring: z
      .object({
        id: z.string().max(80).describe("Connection id (con_…)."),
        name: z.string().max(128).describe("Connection name."),
        revokeAt: time.describe("When it is revoked: the rotation's time plus gracePeriod."),
      })
      .optional()
      .describe("The connection the last rotation replaced: it keeps working until revokeAt."),
  })
  .describe("Rotation of the Secret's credentials.");

export const DeletionProtection = z
  .boolean()
  .default(false)
  .describe(
    "When true, deleting this resource (kubectl delete, a GitOps prune, a namespace deletion) is refused by the " +
      "ValidatingAdmissionPolicy mds-deletion-protection that deploy/ installs (Kubernetes >= 1.30; a cluster " +
      "without that policy does not enforce it). To delete a protected resource, set this to false first, then delete.",
  );

/** status.connection of every kind that publishes a Secret (written by the operator's connection-Secret component). */
export const PublishedConnection = z
  .object({
    id: z.string().max(80).describe("Connection id (con_…)."),
    name: z.string().max(128).describe("Connection name."),
  })
  .describe("The service connection whose credentials are in the Secret.");

/** status.credentials: which Secret's token the resource acts with (src/operator/credentials.ts chooses it). */
export const CredentialStatus = z
  .object({
    secret: z.string().max(317).describe("<namespace>/<name> of the Secret holding the API token."),
    key: z.string().max(253).describe("Key of the token in that Secret."),
    source: z
      .enum(["spec", "namespace", "operator"])
      .describe(
        "spec: spec.credentials; namespace: the namespace's own mds-credentials Secret; operator: the operator's default.",
      ),
  })
  .describe("The credentials the operator uses for this resource (never the token itself).");

export const ManagementPolicy = z
  .enum(["Full", "ObserveOnly"])
  .default("Full")
  .describe(
    "Full (default): the operator creates, updates, deletes and mints credentials. ObserveOnly: it only reads the " +
      "remote object (spec.externalId, or the one it created earlier), mirrors its status and reports how it differs " +
      "from the spec in status.drift; it never creates, changes, deletes or mints, and writes no Secret. Switching " +
      "to Full adopts the object.",
  );

/** status.drift: where the remote object differs from the spec (written while managementPolicy is ObserveOnly). */
export const Drift = z
  .array(
    z
      .object({
        field: z.string().max(128).describe("The spec field, e.g. displayName."),
        desired: z.string().max(256).describe("What the spec asks for."),
        actual: z.string().max(256).describe("What the remote object has."),
      })
      .describe("One field that differs."),
  )
  .max(32)
  .describe(
    "How the remote object differs from the spec; written in ObserveOnly mode, where the operator does not change it.",
  );

/** The status fields the managed loop writes for every kind (credentials, drift, the handled reconcile request). */
export const managedStatusFields = {
  credentials: CredentialStatus.optional(),
  drift: Drift.optional(),
  lastHandledReconcileAt: z
    .string()
    .max(128)
    .optional()
    .describe("The last value of the mds.dev/reconcile-requested-at annotation the operator acted on."),
};
