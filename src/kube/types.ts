// The few object shapes the operator touches, typed loosely on purpose: custom resources are parsed with
// their zod schemas by the code that owns them; this layer only needs metadata.

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean | undefined;
  blockOwnerDeletion?: boolean | undefined;
}

interface ObjectMeta {
  name: string;
  namespace?: string | undefined;
  uid?: string | undefined;
  resourceVersion?: string | undefined;
  generation?: number | undefined;
  creationTimestamp?: string | undefined;
  deletionTimestamp?: string | undefined;
  labels?: Record<string, string> | undefined;
  annotations?: Record<string, string> | undefined;
  finalizers?: string[] | undefined;
  ownerReferences?: OwnerReference[] | undefined;
  managedFields?: unknown | undefined;
}

export interface KubeObject {
  apiVersion?: string | undefined;
  kind?: string | undefined;
  metadata: ObjectMeta;
  [key: string]: unknown;
}

export interface Secret extends KubeObject {
  type?: string;
  data?: Record<string, string>;
  stringData?: Record<string, string>;
}

/** A resource kind the layer can address: enough to build URLs. */
export interface ResourceType {
  group: string; // "" for core
  version: string;
  plural: string;
  kind: string;
  namespaced: boolean;
}

export const SecretType: ResourceType = {
  group: "",
  version: "v1",
  plural: "secrets",
  kind: "Secret",
  namespaced: true,
};
export const EventType: ResourceType = { group: "", version: "v1", plural: "events", kind: "Event", namespaced: true };
export const LeaseType: ResourceType = {
  group: "coordination.k8s.io",
  version: "v1",
  plural: "leases",
  kind: "Lease",
  namespaced: true,
};

/** The URL path of a collection (namespace undefined = all namespaces) or of one object. */
export function pathOf(type: ResourceType, namespace?: string, name?: string, subresource?: string): string {
  const base = type.group === "" ? `/api/${type.version}` : `/apis/${type.group}/${type.version}`;
  const ns = type.namespaced && namespace !== undefined ? `/namespaces/${encodeURIComponent(namespace)}` : "";
  const obj = name === undefined ? "" : `/${encodeURIComponent(name)}`;
  const sub = subresource === undefined ? "" : `/${subresource}`;
  return `${base}${ns}/${type.plural}${obj}${sub}`;
}

export interface ObjectList<T extends KubeObject = KubeObject> {
  items: T[];
  metadata: { resourceVersion?: string; continue?: string };
}

/** Drops what the operator never reads and what costs most memory (managedFields are 21-30 % of an object). */
export function stripObject<T extends KubeObject>(obj: T): T {
  const meta = obj.metadata;
  if (meta === undefined) return obj;
  delete meta.managedFields;
  if (meta.annotations !== undefined && "kubectl.kubernetes.io/last-applied-configuration" in meta.annotations) {
    delete meta.annotations["kubectl.kubernetes.io/last-applied-configuration"];
  }
  return obj;
}
