// What differs between the two served versions of the mds.dev kinds: the single statement of it. The CRDs'
// v1beta1 schemas (versions.ts), the conversion webhook (convert.ts) and docs/upgrade.md follow from this table.
//
// Every difference is an enum whose values v1beta1 spells in CamelCase, as the Kubernetes API conventions ask
// ("enumerated values ... should be CamelCase"); v1alpha1 spelled them in lower case. Each map is a bijection over the
// field's enum, so conversion is lossless both ways without an annotation: no field exists in one version only.

/** One enum field of some kinds, with its values in v1alpha1 → v1beta1. */
interface EnumChange {
  kinds: readonly string[];
  /** Object path from the top of the resource, e.g. spec → source → type. */
  path: readonly string[];
  values: Readonly<Record<string, string>>;
  /** Why the field changed (docs/upgrade.md quotes it). */
  why: string;
}

const allKinds = ["Project", "Database", "Connection", "DatabaseRestore", "DatabaseBackup", "BackupSchedule"];

export const enumChanges: readonly EnumChange[] = [
  {
    kinds: ["Database"],
    path: ["spec", "source", "type"],
    values: { empty: "Empty", backup: "Backup", database: "Database" },
    why: "an enum of this API: CamelCase values, like every other enum of the kinds (deletionPolicy, managementPolicy)",
  },
  {
    kinds: ["Database"],
    path: ["spec", "branch", "role"],
    values: { preview: "Preview", production: "Production" },
    why: "an enum of this API: CamelCase values (the default becomes Preview)",
  },
  {
    kinds: ["Database"],
    path: ["status", "source", "type"],
    values: { backup: "Backup", database: "Database" },
    why: "the status echo of spec.source.type: the same values as the spec",
  },
  {
    kinds: ["Project", "Database", "Connection"],
    path: ["spec", "connectionSecret", "endpoint"],
    values: { pooled: "Pooled", direct: "Direct", accelerate: "Accelerate" },
    why: "an enum of this API: CamelCase values (the default becomes Pooled)",
  },
  {
    kinds: allKinds,
    path: ["status", "credentials", "source"],
    values: { spec: "Spec", namespace: "Namespace", operator: "Operator" },
    why: "an enum of this API's status: CamelCase values, so tools matching on it see one style",
  },
];

/** The changes that apply to one kind. */
export function changesOf(kind: string): EnumChange[] {
  return enumChanges.filter((c) => c.kinds.includes(kind));
}
