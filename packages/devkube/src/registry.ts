import { admissionPolicyResourceTypes } from "./admission-policy.ts";
import { builtinResourceTypes, crdBaseType } from "./builtins.ts";
import { podResourceTypes } from "./pod-kinds.ts";
import type { ResourceType } from "./resource-type.ts";
import { workloadResourceTypes } from "./workloads.ts";

export interface GroupVersion {
  group: string;
  version: string;
  types: ResourceType[];
}

/** Which resources are served at which group/version; CRDs add and remove entries at runtime. */
export class Registry {
  private readonly builtins: ResourceType[];
  private readonly crds = new Map<string, ResourceType[]>();
  /** Bumped on every change so discovery and OpenAPI hashes move (kubectl caches by URL). */
  revision = 0;

  constructor() {
    this.builtins = [
      ...builtinResourceTypes(),
      ...workloadResourceTypes(),
      ...podResourceTypes(),
      ...admissionPolicyResourceTypes(),
      crdBaseType(),
    ];
  }

  all(): ResourceType[] {
    return [...this.builtins, ...[...this.crds.values()].flat()];
  }

  lookup(group: string, version: string, plural: string): ResourceType | undefined {
    return this.all().find((t) => t.group === group && t.version === version && t.plural === plural);
  }

  /** The type to use when acting on stored objects (GC, namespace cleanup): the first served version. */
  forStorageKey(sk: string): ResourceType | undefined {
    return this.all().find((t) => t.storageKey === sk && !(t.group === "events.k8s.io"));
  }

  byKind(apiVersion: string, kind: string): ResourceType | undefined {
    return this.all().find((t) => (t.group ? `${t.group}/${t.version}` : t.version) === apiVersion && t.kind === kind);
  }

  hasGroupVersion(group: string, version: string): boolean {
    return this.all().some((t) => t.group === group && t.version === version);
  }

  /** Groups in a stable order: core first, built-in groups, then CRD groups by name. */
  groupVersions(): GroupVersion[] {
    const map = new Map<string, GroupVersion>();
    for (const t of this.all()) {
      const key = `${t.group}/${t.version}`;
      let gv = map.get(key);
      if (!gv) map.set(key, (gv = { group: t.group, version: t.version, types: [] }));
      gv.types.push(t);
    }
    return [...map.values()];
  }

  setCrd(name: string, types: ResourceType[]): void {
    this.crds.set(name, types);
    this.revision++;
  }

  removeCrd(name: string): void {
    const types = this.crds.get(name);
    if (!types) return;
    this.crds.delete(name);
    this.revision++;
    for (const l of this.removalListeners) for (const t of types) l(t.storageKey);
  }

  private readonly removalListeners = new Set<(storageKey: string) => void>();

  /** Called with the storage key of every resource type that stops being served. */
  onRemoved(listener: (storageKey: string) => void): void {
    this.removalListeners.add(listener);
  }

  crdTypes(name: string): ResourceType[] {
    return this.crds.get(name) ?? [];
  }
}
