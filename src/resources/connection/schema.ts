import { z } from "zod";
import type { ResourceType } from "../../kube/types.ts";
import { apiVersion, group, version } from "../group.ts";
import { Conditions } from "../conditions.ts";
import {
  Credentials,
  DeletionProtection,
  ObjectMeta,
  exactlyOne,
  idPattern,
  immutableFields,
  managedStatusFields,
} from "../common.ts";
import {
  Binding,
  ConnectionSecret,
  PublishedConnection,
  RotationStatus,
  secretNameUnchanged,
} from "../../operator/secret/spec.ts";
import type { CrdDefinition } from "../kit/crd.ts";
import { age, condition } from "../kit/printer-columns.ts";

// One revocable credential of a Database for one application, with its own Secret; in another namespace only when
// the Database allows that namespace (spec.connectionPolicy.allowedNamespaces).

const DatabaseReference = z
  .object({
    name: z.string().min(1).max(253).describe("Name of the Database resource."),
    namespace: z
      .string()
      .min(1)
      .max(63)
      .optional()
      .describe("Its namespace; defaults to the Connection's. Another namespace must be allowed by the Database."),
  })
  .describe("A Database resource, possibly in another namespace.");

const ConnectionSpec = z
  .object({
    databaseRef: DatabaseReference.optional().describe(
      "The Database whose connection this is. Exactly one of databaseRef and databaseId. Immutable.",
    ),
    databaseId: z
      .string()
      .regex(idPattern("db"))
      .max(80)
      .optional()
      .describe(
        "The remote id (db_…) of the database, for one no Database resource manages. Exactly one of databaseRef and databaseId. Immutable.",
      ),
    connectionSecret: ConnectionSecret.optional(),
    credentials: Credentials.optional().describe(
      "The API token, required with databaseId (the operator's own token is never lent by id); with databaseRef the Database's own credentials are used.",
    ),
    deletionPolicy: z
      .enum(["Delete", "Retain"])
      .default("Delete")
      .describe(
        "What happens to the connection when this resource is deleted: Delete (default) revokes it and deletes the Secret; Retain keeps both.",
      ),
    deletionProtection: DeletionProtection,
  })
  .meta({
    "x-kubernetes-validations": [
      exactlyOne("databaseRef", "databaseId", "databaseRef.name or databaseId"),
      {
        rule: "!has(self.databaseId) || has(self.credentials)",
        message:
          "a Connection by databaseId needs credentials.secretRef: a token of the database's workspace in this namespace",
      },
      ...immutableFields("databaseRef", "databaseId"),
      secretNameUnchanged,
    ],
  })
  .describe("Desired state of one connection (a login and password) of a database.");
type ConnectionSpec = z.infer<typeof ConnectionSpec>;

const ConnectionStatus = z
  .object({
    id: z.string().max(80).optional().describe("The connection's id (con_…): the current one after a rotation."),
    databaseId: z.string().max(80).optional().describe("The remote database's id (db_…)."),
    connection: PublishedConnection.optional(),
    secretName: z.string().max(253).optional().describe("Name of the connection Secret."),
    binding: Binding.optional(),
    rotation: RotationStatus.optional(),
    ...managedStatusFields,
    observedGeneration: z.number().int().min(0).optional().describe("The metadata.generation last reconciled."),
    conditions: Conditions.optional(),
  })
  .describe("Observed state of the connection.");
type ConnectionStatus = z.infer<typeof ConnectionStatus>;

export const Connection = z
  .object({
    apiVersion: z.literal(apiVersion),
    kind: z.literal("Connection"),
    metadata: ObjectMeta,
    spec: ConnectionSpec,
    status: ConnectionStatus.optional(),
  })
  .describe("One revocable connection of a database for one application, with its credentials in its own Secret.");
export type Connection = z.infer<typeof Connection>;

/** The CRD's names and printer columns (src/resources/kit/crd.ts builds the CustomResourceDefinition from it). */
export const connectionDefinition: CrdDefinition = {
  kind: "Connection",
  plural: "connections",
  singular: "connection",
  shortNames: ["mdsconn"],
  spec: ConnectionSpec,
  status: ConnectionStatus,
  whole: Connection,
  printerColumns: [
    condition("Ready"),
    condition("Synced"),
    { name: "DATABASE", type: "string", jsonPath: ".status.databaseId", description: "Remote database id." },
    { name: "SECRET", type: "string", jsonPath: ".status.secretName", description: "Connection Secret." },
    { name: "ID", type: "string", jsonPath: ".status.id", description: "Remote connection id." },
    age,
  ],
};

/** The kind's address for the Kubernetes client. */
export const ConnectionType: ResourceType = {
  group,
  version,
  plural: connectionDefinition.plural,
  kind: "Connection",
  namespaced: true,
};
