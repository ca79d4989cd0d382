import type { ListTypes } from "./patch/index.ts";
import type { CompiledSchema } from "./schema/index.ts";
import type { Obj } from "./types.ts";

export interface PrinterColumn {
  name: string;
  type: string;
  format?: string;
  description?: string;
  priority?: number;
  jsonPath: string;
}
export interface TableColumn {
  name: string;
  type: string;
  format: string;
  description: string;
  priority: number;
}
export interface BuiltinTable {
  columns: TableColumn[];
  cells(obj: Obj, now: Date): unknown[];
}

/** Context handed to kind-specific preparation hooks. */
export interface PrepareContext {
  operation: "create" | "update";
  old: Obj | undefined;
}

/** One served resource at one group/version. Built-ins and CRD versions share this shape. */
export interface ResourceType {
  group: string;
  version: string;
  kind: string;
  listKind: string;
  plural: string;
  singular: string;
  namespaced: boolean;
  shortNames: string[];
  categories: string[];
  /** Objects of every version of one resource share a storage ("group/plural"); core and events.k8s.io events too. */
  storageKey: string;
  subresources: string[];
  verbs: string[];
  /** Custom resources: no unconditional PUT, no strategic merge patch, list items keep kind/apiVersion. */
  custom: boolean;
  /** Maintains metadata.generation (CRs, CRDs). */
  generation: boolean;
  /** Key the strategic-merge-patch library knows this kind by. */
  kindKey: string;
  /** Top-level fields the typed decoder knows (built-ins); unknown ones are pruned or rejected. */
  knownFields?: Set<string>;
  /** Known fields of nested built-in structs by dotted path ("spec", "rules[]" for list items). */
  nestedKnownFields?: Record<string, string[]>;
  /** Extra field-selector keys beyond metadata.name / metadata.namespace. */
  fieldSelector?: (obj: Obj, field: string) => string | undefined;
  fieldSelectorKeys?: string[];
  table?: BuiltinTable;
  printerColumns?: PrinterColumn[];
  schema?: CompiledSchema;
  /** Built-ins: server-side-apply list types (upstream x-kubernetes-list-type/-map-keys) beyond the shared ones. */
  listTypes?: ListTypes;
  /** A deprecated version's warning, sent with every request to it (`Warning: 299 - "…"`). */
  deprecationWarning?: string;
  /** Wire form (this version) → storage form, and back. */
  toStorage?: (obj: Obj) => Obj;
  fromStorage?: (obj: Obj) => Obj;
  /** Kind-specific defaulting and validation; throws ApiError. */
  prepare?: (obj: Obj, ctx: PrepareContext) => void;
  /** DELETE answers with the object instead of a Status (ServiceAccount, Namespace). */
  deleteReturnsObject?: boolean;
  /** For CRs: the CRD that defines them. */
  crdName?: string;
  /** For CRs with a scale subresource: JSONPaths (".spec.replicas") of the replica counts and selector. */
  scale?: { specReplicasPath: string; statusReplicasPath: string; labelSelectorPath?: string };
}

export function apiVersionOf(rt: { group: string; version: string }): string {
  return rt.group ? `${rt.group}/${rt.version}` : rt.version;
}

export const ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];
