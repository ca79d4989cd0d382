import { z } from "zod";
import type { ResourceType } from "../../kube/types.ts";
import { apiVersion, group, version } from "../group.ts";
import { Conditions } from "../conditions.ts";
import {
  DeletionProtection,
  Credentials,
  DeletionPolicy,
  ObjectMeta,
  Region,
  idPattern,
  immutableFields,
  managedStatusFields,
  ManagementPolicy,
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

const ProjectSpec = z
  .object({
    displayName: z
      .string()
      .trim()
      .min(1)
      .max(64)
      .optional()
      .describe("The project's name at the service. Defaults to the resource's name."),
    region: Region.optional().describe(
      "Default region of the project and region of its default database. Defaults to the service's first region. Immutable.",
    ),
    workspaceId: z
      .string()
      .min(1)
      .max(128)
      .optional()
      .describe("Workspace to create the project in. Defaults to the workspace of the API token. Immutable."),
    connectionSecret: ConnectionSecret.optional().describe(
      "Create the project with a default database and write that database's connection Secret here. When omitted, " +
        "the project is created without a default database; declare Databases for it instead. Cannot be added or " +
        "removed after creation.",
    ),
    credentials: Credentials.optional(),
    deletionPolicy: DeletionPolicy,
    deletionProtection: DeletionProtection,
    managementPolicy: ManagementPolicy,
    externalId: z
      .string()
      .regex(idPattern("proj"))
      .max(80)
      .optional()
      .describe("Adopt this existing remote project (proj_…) instead of creating one. Immutable."),
  })
  .meta({
    "x-kubernetes-validations": [
      ...immutableFields("region", "workspaceId", "externalId"),
      {
        rule: "has(self.connectionSecret) == has(oldSelf.connectionSecret)",
        message:
          "connectionSecret cannot be added or removed after creation: the default database is created with the project",
      },
      secretNameUnchanged,
    ],
  })
  .describe("Desired state of a project at the Managed Database Service.");
type ProjectSpec = z.infer<typeof ProjectSpec>;

export const ProjectStatus = z
  .object({
    id: z.string().max(80).optional().describe("The remote project's id (proj_…)."),
    url: z.string().max(2048).optional().describe("The remote project's API URL."),
    workspace: z
      .object({
        id: z.string().max(128).describe("Workspace id."),
        name: z.string().max(256).describe("Workspace name."),
      })
      .optional()
      .describe("The workspace the project belongs to."),
    defaultRegion: z.string().max(64).optional().describe("The project's default region as the service reports it."),
    defaultDatabase: z
      .object({
        id: z.string().max(80).describe("Database id (db_…)."),
        name: z.string().max(128).describe("Database name."),
        status: z.string().max(32).describe("Remote status: provisioning, ready, recovering or failure."),
      })
      .optional()
      .describe("The project's default database, when it was created with one."),
    secretName: z.string().max(253).optional().describe("Name of the default database's connection Secret."),
    binding: Binding.optional(),
    rotation: RotationStatus.optional(),
    connection: PublishedConnection.optional(),
    ...managedStatusFields,
    observedGeneration: z.number().int().min(0).optional().describe("The metadata.generation last reconciled."),
    conditions: Conditions.optional(),
  })
  .describe("Observed state of the project.");
export type ProjectStatus = z.infer<typeof ProjectStatus>;

export const Project = z
  .object({
    apiVersion: z.literal(apiVersion),
    kind: z.literal("Project"),
    metadata: ObjectMeta,
    spec: ProjectSpec,
    status: ProjectStatus.optional(),
  })
  .describe(
    "A project at the Managed Database Service: a workspace's container of databases with a default region, and " +
      "optionally a default database whose credentials go to a Secret.",
  );
export type Project = z.infer<typeof Project>;

/** The CRD's names and printer columns (src/resources/kit/crd.ts builds the CustomResourceDefinition from it). */
export const projectDefinition: CrdDefinition = {
  kind: "Project",
  plural: "projects",
  singular: "project",
  shortNames: ["mdsproject"],
  spec: ProjectSpec,
  status: ProjectStatus,
  whole: Project,
  printerColumns: [
    condition("Ready"),
    condition("Synced"),
    { name: "REGION", type: "string", jsonPath: ".status.defaultRegion", description: "Default region." },
    { name: "ID", type: "string", jsonPath: ".status.id", description: "Remote project id." },
    {
      name: "SECRET",
      type: "string",
      jsonPath: ".status.secretName",
      description: "Default database's Secret.",
      priority: 1,
    },
    age,
  ],
};

/** The kind's address for the Kubernetes client. */
export const ProjectType: ResourceType = {
  group,
  version,
  plural: projectDefinition.plural,
  kind: "Project",
  namespaced: true,
};
