import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { Store } from "./store.ts";
import { isObj, metaOf, type Obj } from "./types.ts";

// Service-account tokens and RBAC authorization (rbac.authorization.k8s.io/v1), evaluated from the
// stored Roles, ClusterRoles and bindings on every request. The admin token bypasses it
// (system:masters, as on a real cluster).

export interface UserInfo {
  name: string;
  groups: string[];
  serviceAccount?: { namespace: string; name: string; uid: string };
}
export interface RequestAttributes {
  verb: string;
  group: string;
  resource: string;
  subresource: string | undefined;
  namespace: string | undefined;
  name: string | undefined;
}
export type Authorizer = (user: UserInfo, attrs: RequestAttributes) => { allowed: boolean; reason?: string };

export function serviceAccountUser(namespace: string, name: string, uid: string): UserInfo {
  return {
    name: `system:serviceaccount:${namespace}:${name}`,
    groups: ["system:serviceaccounts", `system:serviceaccounts:${namespace}`, "system:authenticated"],
    serviceAccount: { namespace, name, uid },
  };
}

/** Tokens bound to a ServiceAccount (by uid) and an expiry, signed with a key kept under DIR. */
export class TokenIssuer {
  private readonly key: Buffer;

  constructor(dir: string) {
    const file = path.join(dir, "sa-signing.key");
    if (existsSync(file)) {
      this.key = Buffer.from(readFileSync(file, "utf8").trim(), "base64");
    } else {
      this.key = randomBytes(32);
      writeFileSync(`${file}.tmp`, this.key.toString("base64"), { mode: 0o600 });
      renameSync(`${file}.tmp`, file);
    }
  }

  issue(
    namespace: string,
    name: string,
    uid: string,
    expirationSeconds: number,
    now = Date.now(),
  ): { token: string; expirationTimestamp: string } {
    const exp = Math.floor(now / 1000) + expirationSeconds;
    const payload = Buffer.from(JSON.stringify({ ns: namespace, sa: name, uid, exp })).toString("base64url");
    const sig = createHmac("sha256", this.key).update(payload).digest("base64url");
    return {
      token: `dk1.${payload}.${sig}`,
      expirationTimestamp: new Date(exp * 1000).toISOString().replace(/\.\d+Z$/, "Z"),
    };
  }

  /** The ServiceAccount a token names, if the signature holds and it has not expired. */
  verify(token: string, now = Date.now()): { namespace: string; name: string; uid: string } | undefined {
    const [prefix, payload, sig] = token.split(".");
    if (prefix !== "dk1" || !payload || !sig) return undefined;
    const want = Buffer.from(createHmac("sha256", this.key).update(payload).digest("base64url"));
    const got = Buffer.from(sig);
    if (want.length !== got.length || !timingSafeEqual(want, got)) return undefined;
    let claims: { ns?: unknown; sa?: unknown; uid?: unknown; exp?: unknown };
    try {
      claims = JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as typeof claims;
    } catch {
      return undefined;
    }
    if (
      typeof claims.ns !== "string" ||
      typeof claims.sa !== "string" ||
      typeof claims.uid !== "string" ||
      typeof claims.exp !== "number"
    )
      return undefined;
    if (claims.exp * 1000 < now) return undefined;
    return { namespace: claims.ns, name: claims.sa, uid: claims.uid };
  }
}

interface Rule {
  verbs: string[];
  apiGroups: string[];
  resources: string[];
  resourceNames: string[];
  nonResourceURLs: string[];
}

function rulesOf(role: Obj | undefined): Rule[] {
  if (!role || !Array.isArray(role["rules"])) return [];
  return role["rules"].filter(isObj).map((r) => ({
    verbs: strings(r["verbs"]),
    apiGroups: strings(r["apiGroups"]),
    resources: strings(r["resources"]),
    resourceNames: strings(r["resourceNames"]),
    nonResourceURLs: strings(r["nonResourceURLs"]),
  }));
}

function strings(v: unknown): string[] {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : [];
}

function subjectMatches(subject: Obj, user: UserInfo, bindingNamespace: string): boolean {
  const kind = subject["kind"];
  const name = subject["name"];
  if (kind === "User") return name === user.name;
  if (kind === "Group") return typeof name === "string" && user.groups.includes(name);
  if (kind === "ServiceAccount") {
    const ns =
      typeof subject["namespace"] === "string" && subject["namespace"] ? subject["namespace"] : bindingNamespace;
    return (
      user.serviceAccount !== undefined && user.serviceAccount.name === name && user.serviceAccount.namespace === ns
    );
  }
  return false;
}

function ruleAllows(rule: Rule, a: RequestAttributes): boolean {
  if (!rule.verbs.includes("*") && !rule.verbs.includes(a.verb)) return false;
  if (!rule.apiGroups.includes("*") && !rule.apiGroups.includes(a.group)) return false;
  const wanted = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
  const resourceOk = rule.resources.some(
    (r) =>
      r === "*" ||
      r === wanted ||
      (a.subresource !== undefined && r === `*/${a.subresource}`) ||
      (a.subresource !== undefined && r === `${a.resource}/*`),
  );
  if (!resourceOk) return false;
  if (rule.resourceNames.length > 0) return a.name !== undefined && rule.resourceNames.includes(a.name);
  return true;
}

function labelsMatch(obj: Obj, selector: unknown): boolean {
  if (!isObj(selector)) return false;
  const labels = isObj(metaOf(obj)["labels"]) ? (metaOf(obj)["labels"] as Obj) : {};
  const ml = isObj(selector["matchLabels"]) ? selector["matchLabels"] : {};
  return Object.entries(ml).every(([k, v]) => labels[k] === v);
}

/** ClusterRole rules, including those aggregated from ClusterRoles matching its aggregationRule. */
function clusterRoleRules(store: Store, name: string): Rule[] {
  const role = store.get("rbac.authorization.k8s.io/clusterroles", "", name);
  if (!role) return [];
  const rules = rulesOf(role);
  const agg = role["aggregationRule"];
  if (isObj(agg) && Array.isArray(agg["clusterRoleSelectors"])) {
    for (const other of store.list("rbac.authorization.k8s.io/clusterroles")) {
      if (metaOf(other)["name"] === name) continue;
      if (agg["clusterRoleSelectors"].some((sel) => labelsMatch(other, sel))) rules.push(...rulesOf(other));
    }
  }
  return rules;
}

export function rbacAuthorizer(store: Store): Authorizer {
  return (user, a) => {
    if (user.groups.includes("system:masters")) return { allowed: true };
    return { allowed: rulesFor(store, user, a.namespace).some((r) => ruleAllows(r, a)) };
  };
}

/** Every rule that applies to a user in a namespace (cluster-wide ones when namespace is undefined). */
export function rulesFor(store: Store, user: UserInfo, namespace: string | undefined): Rule[] {
  if (user.groups.includes("system:masters"))
    return [{ verbs: ["*"], apiGroups: ["*"], resources: ["*"], resourceNames: [], nonResourceURLs: [] }];
  const bound = (b: Obj, bindingNamespace: string) =>
    Array.isArray(b["subjects"]) && b["subjects"].filter(isObj).some((s) => subjectMatches(s, user, bindingNamespace));
  const rules: Rule[] = [];
  for (const b of store.list("rbac.authorization.k8s.io/clusterrolebindings")) {
    const ref = isObj(b["roleRef"]) ? b["roleRef"] : {};
    if (bound(b, "") && ref["kind"] === "ClusterRole") rules.push(...clusterRoleRules(store, String(ref["name"])));
  }
  if (namespace !== undefined) {
    for (const b of store.list("rbac.authorization.k8s.io/rolebindings", namespace)) {
      if (!bound(b, namespace)) continue;
      const ref = isObj(b["roleRef"]) ? b["roleRef"] : {};
      if (ref["kind"] === "ClusterRole") rules.push(...clusterRoleRules(store, String(ref["name"])));
      else if (ref["kind"] === "Role")
        rules.push(...rulesOf(store.get("rbac.authorization.k8s.io/roles", namespace, String(ref["name"]))));
    }
  }
  return rules;
}

/** Forbidden message exactly as kube-apiserver words it. */
export function forbiddenMessage(user: UserInfo, a: RequestAttributes): string {
  const qualified = a.group ? `${a.resource}.${a.group}` : a.resource;
  const subject = `${qualified}${a.name ? ` "${a.name}"` : ""}`;
  const resource = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
  const scope = a.namespace !== undefined ? ` in the namespace "${a.namespace}"` : " at the cluster scope";
  return `${subject} is forbidden: User "${user.name}" cannot ${a.verb} resource "${resource}" in API group "${a.group}"${scope}`;
}

/** The default ClusterRoles a cluster ships that bindings commonly reference. */
export function defaultClusterRoles(): Obj[] {
  const all = { apiGroups: ["*"], resources: ["*"], verbs: ["*"] };
  const read = ["get", "list", "watch"];
  const write = ["create", "update", "patch", "delete", "deletecollection"];
  const role = (name: string, rules: Obj[]): Obj => ({
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRole",
    metadata: { name, labels: { "kubernetes.io/bootstrapping": "rbac-defaults" } },
    rules,
  });
  // the workload kinds as upstream's aggregated admin/edit/view grant them (scale for edit, status for view)
  const workloads = {
    apiGroups: ["", "apps", "batch", "policy", "networking.k8s.io"],
    resources: [
      "pods",
      "services",
      "persistentvolumeclaims",
      "deployments",
      "deployments/scale",
      "replicasets",
      "replicasets/scale",
      "statefulsets",
      "statefulsets/scale",
      "daemonsets",
      "jobs",
      "cronjobs",
      "poddisruptionbudgets",
      "networkpolicies",
    ],
  };
  const workloadStatus = {
    apiGroups: ["", "apps", "batch", "policy"],
    resources: [
      "pods/status",
      "services/status",
      "persistentvolumeclaims/status",
      "deployments/status",
      "replicasets/status",
      "statefulsets/status",
      "daemonsets/status",
      "controllerrevisions",
      "jobs/status",
      "cronjobs/status",
      "poddisruptionbudgets/status",
    ],
    verbs: read,
  };
  return [
    role("cluster-admin", [all, { nonResourceURLs: ["*"], verbs: ["*"] }]),
    role("admin", [
      {
        apiGroups: ["", "coordination.k8s.io", "events.k8s.io"],
        resources: ["configmaps", "secrets", "serviceaccounts", "events", "leases"],
        verbs: [...read, ...write],
      },
      { apiGroups: ["rbac.authorization.k8s.io"], resources: ["roles", "rolebindings"], verbs: [...read, ...write] },
      { ...workloads, verbs: [...read, ...write] },
      workloadStatus,
    ]),
    role("edit", [
      {
        apiGroups: ["", "coordination.k8s.io", "events.k8s.io"],
        resources: ["configmaps", "secrets", "serviceaccounts", "events", "leases"],
        verbs: [...read, ...write],
      },
      { ...workloads, verbs: [...read, ...write] },
      workloadStatus,
    ]),
    role("view", [
      {
        apiGroups: ["", "coordination.k8s.io", "events.k8s.io"],
        resources: ["configmaps", "serviceaccounts", "events", "leases", "namespaces"],
        verbs: read,
      },
      { ...workloads, verbs: read },
      workloadStatus,
    ]),
  ];
}
