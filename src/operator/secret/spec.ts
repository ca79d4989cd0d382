import { z } from "zod";
import { objectName, secretKey } from "../../kube/names.ts";

// The connection Secret's part of a resource's API: spec.connectionSecret (with the template variables the renderer
// fills in, render.ts) and the status fields the component writes (connection, binding, rotation). The kinds' schemas
// import these, so a new template variable or Secret option is one edit here plus its use in render.ts.

// The variables a template may use: plain substitution, no code is evaluated.
const templateVariables = [
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
const operatorKeyPrefix = "mds.dev/";
const operatorKeysMessage = `mds.dev/ keys are the operator's: remove them from connectionSecret.labels and connectionSecret.annotations`;
const secretMetadataMap = (what: string) =>
  stringMap(what)
    .refine((m) => Object.keys(m).every((k) => !k.startsWith(operatorKeyPrefix)), { message: operatorKeysMessage })
    .meta({
      maxProperties: 64,
      "x-kubernetes-validations": [
        { rule: `self.all(k, !k.startsWith('${operatorKeyPrefix}'))`, message: operatorKeysMessage },
      ],
    });

// A Kubernetes-style duration: 720h, 1h30m, 45s, 500ms (what parseDuration in src/operator/duration.ts reads).
const duration = z
  .string()
  .max(32)
  .regex(/^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$/, { message: "a duration such as 720h, 1h30m or 45s" })
  .describe("A duration such as 720h, 1h30m or 45s.");

const SecretEndpoint = z
  .enum(["pooled", "direct", "accelerate"])
  .default("pooled")
  .describe(
    "Which endpoint DATABASE_URL points at: pooled (default; the pooler when the region has one), direct, or " +
      "accelerate (the connection's accelerate endpoint, ACCELERATE_URL; pooled when the connection has none).",
  );
type SecretEndpoint = z.infer<typeof SecretEndpoint>;

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
            "How long the replaced credentials keep working after a rotation at least (default 10m). With consumers " +
              "Ignore they are revoked then; with Restart or Wait not before the Secret's consumers have moved too.",
          ),
        consumers: z
          .enum(["Restart", "Wait", "Ignore"])
          .optional()
          .describe(
            "What a rotation does with the workloads in this namespace whose pods use the Secret (env, envFrom, " +
              "volumes): Restart rolls each Deployment, StatefulSet and DaemonSet (a pod-template annotation, as " +
              "kubectl rollout restart) and revokes the old credentials only once they rolled, no pod started " +
              "before the rotation runs and, where the API reports it, no client session of the old login is " +
              "left; Wait rolls nothing but waits alike; Ignore (default) revokes after " +
              "gracePeriod whatever uses them. Restart and Wait need the operator's --rotation-consumers.",
          ),
        consumerTimeout: duration
          .optional()
          .describe(
            "How long Restart or Wait waits for the consumers (default 30m). Past it the old credentials are kept, " +
              "Reconciling=True reason ConsumersNotRolled names the workloads; a new value of the annotation " +
              "mds.dev/rotate-force revokes them anyway.",
          ),
      })
      .optional()
      .describe(
        "Rotation with overlap: a new connection is minted and published to the Secret (its data-hash annotation " +
          "changes, so pods that roll on it pick it up), the old one keeps working for gracePeriod (and, with " +
          "consumers Restart or Wait, until the Secret's consumers have moved), then it is revoked. " +
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

/** status.connection of every kind whose resources own a Secret (written by publisher.ts). */
export const PublishedConnection = z
  .object({
    id: z.string().max(80).describe("The service's connection id (con_…)."),
    name: z.string().max(128).describe("The service's connection name."),
  })
  .describe("The service connection whose credentials are in the Secret.");

// connectionSecret.name is immutable; written out because has() on a missing parent is an error in CEL.
const celSecretName = (o: string) =>
  `(has(${o}.connectionSecret) && has(${o}.connectionSecret.name) ? ${o}.connectionSecret.name : '')`;
export const secretNameUnchanged = {
  rule: `${celSecretName("self")} == ${celSecretName("oldSelf")}`,
  message: "connectionSecret.name is immutable: create a new resource to use another Secret",
};

/** status.binding of the servicebinding.io Provisioned Service contract: the Secret a binding should project. */
export const Binding = z
  .object({ name: z.string().max(253).describe("Name of the connection Secret.") })
  .describe("The servicebinding.io Provisioned Service binding: the name of the Secret with the credentials.");

const time = z.iso.datetime();
/** status.rotation: where the Secret's credentials are in their rotation (rotation.ts). */
export const RotationStatus = z
  .object({
    lastRotationTime: time.optional().describe("When the credentials were last rotated."),
    nextRotationTime: time
      .optional()
      .describe("When the next scheduled rotation is due (rotation.every, spread by up to 10 %)."),
    trigger: z.string().max(253).optional().describe("The last value of the mds.dev/rotate annotation acted on."),
    forced: z.string().max(253).optional().describe("The last value of the mds.dev/rotate-force annotation acted on."),
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
        id: z.string().max(80).describe("The service's connection id (con_…)."),
        name: z.string().max(128).describe("The service's connection name."),
        revokeAt: time.describe(
          "When it may be revoked at the earliest: the rotation's time plus gracePeriod (consumers Ignore: when it is).",
        ),
        consumersDeadline: time
          .optional()
          .describe("consumers Restart or Wait: when waiting for the Secret's consumers ends (consumerTimeout)."),
        waitingFor: z
          .array(z.string().max(300).describe("One consumer and why it holds the revocation back."))
          .max(10)
          .optional()
          .describe(
            "The consumers the revocation still waits for, as Kind/name and why (at most 10 named), e.g. " +
              "'Deployment/web: 2 of 3 replicas updated', or '2 open sessions of the old login'.",
          ),
      })
      .optional()
      .describe("The connection the last rotation replaced: it keeps working until revokeAt."),
  })
  .describe("Rotation of the Secret's credentials.");
export type RotationStatus = z.infer<typeof RotationStatus>;

/** What a resource's spec says about its connection Secret, as written (defaults not yet applied). */
export type ConnectionSecretSpec = z.input<typeof ConnectionSecret>;

/** The Secret's name: spec.connectionSecret.name, else the owner's own name. */
export function secretNameOf(owner: {
  metadata: { name: string };
  spec: { connectionSecret?: { name?: string | undefined } | undefined };
}): string {
  return owner.spec.connectionSecret?.name ?? owner.metadata.name;
}
