import type { ResourceType } from "../kube/types.ts";
import { group, version } from "./group.ts";

// Addresses of the three kinds for the kube layer (plurals as in crds/).
export const ProjectType: ResourceType = { group, version, plural: "projects", kind: "Project", namespaced: true };
export const DatabaseType: ResourceType = { group, version, plural: "databases", kind: "Database", namespaced: true };
export const DatabaseRestoreType: ResourceType = { group, version, plural: "databaserestores", kind: "DatabaseRestore", namespaced: true };
