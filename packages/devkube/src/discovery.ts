import type { GroupVersion, Registry } from "./registry.ts";
import type { ResourceType } from "./resource-type.ts";
import type { Obj } from "./types.ts";

// Discovery documents, legacy (per group-version) and aggregated (apidiscovery.k8s.io/v2).

export const AGGREGATED_CONTENT_TYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/** Kubernetes version priority: v2 > v1 > v1beta2 > v1beta1 > v1alpha1 > anything else (alphabetical). */
function compareVersions(a: string, b: string): number {
  const parse = (v: string) => {
    const m = /^v(\d+)(?:(alpha|beta)(\d+))?$/.exec(v);
    if (!m) return undefined;
    const stage = m[2] === undefined ? 3 : m[2] === "beta" ? 2 : 1;
    return { major: Number(m[1]), stage, minor: Number(m[3] ?? 0) };
  };
  const pa = parse(a);
  const pb = parse(b);
  if (pa && pb) {
    if (pa.stage !== pb.stage) return pb.stage - pa.stage;
    if (pa.major !== pb.major) return pb.major - pa.major;
    return pb.minor - pa.minor;
  }
  if (pa) return -1;
  if (pb) return 1;
  return a.localeCompare(b);
}

interface Group {
  name: string;
  versions: GroupVersion[];
}

function groups(registry: Registry): Group[] {
  const map = new Map<string, Group>();
  for (const gv of registry.groupVersions()) {
    if (gv.group === "") continue;
    let g = map.get(gv.group);
    if (!g) map.set(gv.group, (g = { name: gv.group, versions: [] }));
    g.versions.push(gv);
  }
  for (const g of map.values()) g.versions.sort((a, b) => compareVersions(a.version, b.version));
  return [...map.values()];
}

export function apiVersions(serverAddress: string): Obj {
  return {
    kind: "APIVersions",
    versions: ["v1"],
    serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress }],
  };
}

function groupDoc(g: Group): Obj {
  const versions = g.versions.map((v) => ({ groupVersion: `${g.name}/${v.version}`, version: v.version }));
  return { name: g.name, versions, preferredVersion: versions[0] };
}

export function apiGroupList(registry: Registry): Obj {
  return { kind: "APIGroupList", apiVersion: "v1", groups: groups(registry).map(groupDoc) };
}

export function apiGroup(registry: Registry, name: string): Obj | undefined {
  const g = groups(registry).find((x) => x.name === name);
  return g ? { kind: "APIGroup", apiVersion: "v1", ...groupDoc(g) } : undefined;
}

export function apiResourceList(registry: Registry, group: string, version: string): Obj | undefined {
  const gv = registry.groupVersions().find((x) => x.group === group && x.version === version);
  if (!gv) return undefined;
  const resources: Obj[] = [];
  for (const t of gv.types) {
    const r: Obj = { name: t.plural, singularName: t.singular, namespaced: t.namespaced, kind: t.kind, verbs: t.verbs };
    if (t.shortNames.length > 0) r["shortNames"] = t.shortNames;
    if (t.categories.length > 0) r["categories"] = t.categories;
    resources.push(r);
    for (const sub of t.subresources) {
      const kind = subresourceKind(t, sub);
      resources.push({
        name: `${t.plural}/${sub}`,
        singularName: "",
        namespaced: t.namespaced,
        kind: kind.kind,
        ...(kind.group !== t.group || kind.version !== t.version ? { group: kind.group, version: kind.version } : {}),
        verbs: subresourceVerbs(sub),
      });
    }
  }
  return {
    kind: "APIResourceList",
    apiVersion: "v1",
    groupVersion: group ? `${group}/${version}` : version,
    resources,
  };
}

function subresourceKind(t: ResourceType, sub: string): { group: string; version: string; kind: string } {
  if (sub === "token") return { group: "authentication.k8s.io", version: "v1", kind: "TokenRequest" };
  if (sub === "scale") return { group: "autoscaling", version: "v1", kind: "Scale" };
  if (sub === "binding") return { group: "", version: "v1", kind: "Binding" };
  return { group: t.group, version: t.version, kind: t.kind };
}

function subresourceVerbs(sub: string): string[] {
  return sub === "token" || sub === "binding" ? ["create"] : ["get", "patch", "update"];
}

function aggregatedResource(t: ResourceType): Obj {
  const r: Obj = {
    resource: t.plural,
    responseKind: { group: t.group, version: t.version, kind: t.kind },
    scope: t.namespaced ? "Namespaced" : "Cluster",
    singularResource: t.singular,
    verbs: t.verbs,
  };
  if (t.shortNames.length > 0) r["shortNames"] = t.shortNames;
  if (t.categories.length > 0) r["categories"] = t.categories;
  if (t.subresources.length > 0) {
    r["subresources"] = t.subresources.map((s) => ({
      subresource: s,
      responseKind: subresourceKind(t, s),
      verbs: subresourceVerbs(s),
    }));
  }
  return r;
}

function aggregatedVersion(gv: GroupVersion): Obj {
  return { version: gv.version, resources: gv.types.map(aggregatedResource), freshness: "Current" };
}

export function aggregatedCore(registry: Registry): Obj {
  const core = registry.groupVersions().filter((gv) => gv.group === "");
  return {
    kind: "APIGroupDiscoveryList",
    apiVersion: "apidiscovery.k8s.io/v2",
    metadata: {},
    items: [{ metadata: { creationTimestamp: null }, versions: core.map(aggregatedVersion) }],
  };
}

export function aggregatedGroups(registry: Registry): Obj {
  return {
    kind: "APIGroupDiscoveryList",
    apiVersion: "apidiscovery.k8s.io/v2",
    metadata: {},
    items: groups(registry).map((g) => ({
      metadata: { name: g.name, creationTimestamp: null },
      versions: g.versions.map(aggregatedVersion),
    })),
  };
}
