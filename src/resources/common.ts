import { z } from "zod";
import { objectName, secretKey } from "../kube/names.ts";

// Pieces shared by the kinds. Every field carries a description: it is what `kubectl explain` shows. The connection
// Secret's fields (spec.connectionSecret, status.connection, binding, rotation) are the Secret component's:
// src/operator/secret/spec.ts.

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

export const LocalObjectReference = z
  .object({ name: objectName.describe("Name of the object in the same namespace.") })
  .describe("A reference to an object in the same namespace.");
export type LocalObjectReference = z.infer<typeof LocalObjectReference>;

const CredentialsSecretRef = z
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

export const DeletionProtection = z
  .boolean()
  .default(false)
  .describe(
    "When true, deleting this resource (kubectl delete, a GitOps prune, a namespace deletion) is refused by the " +
      "ValidatingAdmissionPolicy mds-deletion-protection that deploy/ installs (Kubernetes >= 1.30; a cluster " +
      "without that policy does not enforce it). To delete a protected resource, set this to false first, then delete.",
  );

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
const Drift = z
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
