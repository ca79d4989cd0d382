// Kubernetes RBAC for one ServiceAccount, evaluated from rendered manifests, and an HTTPS proxy in front of devkube
// that enforces it: every request through the proxy is the operator's, is authorised against exactly the Roles and
// ClusterRoles that deploy/ binds to mds-system/mds-operator, and is answered 403 (a Kubernetes Status) otherwise.
// devkube has an authorisation seam but knows one user only (its admin token); the proxy is how a test tells the
// operator's requests from its own.
import { createServer, request as httpsRequest, type Server } from "node:https";
import type { AddressInfo } from "node:net";

export interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  verbs: string[];
}
interface Subject {
  kind: string;
  name: string;
  namespace?: string;
}
interface RbacObject {
  kind: string;
  metadata: { name: string; namespace?: string };
  rules?: PolicyRule[];
  roleRef?: { kind: string; name: string };
  subjects?: Subject[];
}

/** A rule and where it applies: `namespace` undefined means cluster-wide (a ClusterRoleBinding). */
export interface Grant {
  namespace: string | undefined;
  rule: PolicyRule;
  from: string;
}

export interface RequestAttributes {
  verb: string;
  group: string;
  resource: string;
  subresource: string | undefined;
  namespace: string | undefined;
  name: string | undefined;
}

/** The rules the manifests grant to the ServiceAccount `namespace/name`. */
export function grantsFor(objects: RbacObject[], serviceAccount: { namespace: string; name: string }): Grant[] {
  const isSubject = (s: Subject) => s.kind === "ServiceAccount" && s.name === serviceAccount.name && s.namespace === serviceAccount.namespace;
  const role = (kind: string, name: string, namespace?: string) =>
    objects.find((o) => o.kind === kind && o.metadata.name === name && (kind === "ClusterRole" || o.metadata.namespace === namespace));
  const grants: Grant[] = [];
  for (const binding of objects.filter((o) => (o.kind === "RoleBinding" || o.kind === "ClusterRoleBinding") && (o.subjects ?? []).some(isSubject))) {
    const ref = binding.roleRef;
    if (ref === undefined) continue;
    const target = role(ref.kind, ref.name, binding.metadata.namespace);
    if (target === undefined) throw new Error(`${binding.kind} ${binding.metadata.name} refers to a missing ${ref.kind} ${ref.name}`);
    const namespace = binding.kind === "ClusterRoleBinding" ? undefined : binding.metadata.namespace;
    for (const rule of target.rules ?? []) grants.push({ namespace, rule, from: `${target.kind}/${target.metadata.name}` });
  }
  return grants;
}

/** The grant that allows `attrs`, as the RBAC authorizer decides it, or undefined. */
export function authorize(grants: Grant[], attrs: RequestAttributes): Grant | undefined {
  const resource = attrs.subresource === undefined ? attrs.resource : `${attrs.resource}/${attrs.subresource}`;
  return grants.find(({ namespace, rule }) => {
    if (namespace !== undefined && namespace !== attrs.namespace) return false;
    if (!(rule.apiGroups ?? []).includes(attrs.group)) return false;
    if (!(rule.resources ?? []).includes(resource)) return false;
    if (!rule.verbs.includes(attrs.verb)) return false;
    // resourceNames never match create (the name is unknown before) nor collection requests.
    if (rule.resourceNames !== undefined && rule.resourceNames.length > 0) return attrs.name !== undefined && rule.resourceNames.includes(attrs.name);
    return true;
  });
}

/** Request attributes of a resource request, or undefined for discovery and other non-resource paths. */
export function attributesOf(method: string, url: URL): RequestAttributes | undefined {
  const segs = url.pathname.split("/").filter(Boolean).map(decodeURIComponent);
  let group: string;
  let rest: string[];
  if (segs[0] === "api" && segs.length >= 3) {
    group = "";
    rest = segs.slice(2);
  } else if (segs[0] === "apis" && segs.length >= 4) {
    group = segs[1] ?? "";
    rest = segs.slice(3);
  } else {
    return undefined;
  }
  let namespace: string | undefined;
  if (rest[0] === "namespaces" && rest.length >= 3) {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  const [resource = "", name, subresource] = rest;
  if (group === "" && resource === "namespaces" && name !== undefined) namespace = name;
  const watch = ["true", "1"].includes(url.searchParams.get("watch") ?? "");
  const verb =
    method === "GET" ? (name !== undefined ? "get" : watch ? "watch" : "list")
    : method === "POST" ? "create"
    : method === "PUT" ? "update"
    : method === "PATCH" ? "patch"
    : method === "DELETE" ? (name !== undefined ? "delete" : "deletecollection")
    : method.toLowerCase();
  return { verb, group, resource, subresource, namespace, name };
}

export interface RbacProxy {
  url: string;
  /** Every resource request the operator made, with the grant that allowed it. */
  allowed: { attrs: RequestAttributes; grant: Grant }[];
  /** Every resource request refused with 403. */
  denied: RequestAttributes[];
  close(): Promise<void>;
}

export async function startRbacProxy(options: { upstream: string; ca: string; cert: string; key: string; grants: Grant[] }): Promise<RbacProxy> {
  const upstream = new URL(options.upstream);
  const allowed: RbacProxy["allowed"] = [];
  const denied: RequestAttributes[] = [];
  const server: Server = createServer({ cert: options.cert, key: options.key }, (req, res) => {
    const url = new URL(req.url ?? "/", upstream);
    const attrs = attributesOf(req.method ?? "GET", url);
    if (attrs !== undefined) {
      const grant = authorize(options.grants, attrs);
      if (grant === undefined) {
        denied.push(attrs);
        const what = `${attrs.group ? `${attrs.resource}.${attrs.group}` : attrs.resource}${attrs.subresource ? `/${attrs.subresource}` : ""}`;
        const message = `${what}${attrs.name ? ` "${attrs.name}"` : ""} is forbidden: User "system:serviceaccount:mds-system:mds-operator" cannot ${attrs.verb} resource "${what}" in API group "${attrs.group}"${attrs.namespace ? ` in the namespace "${attrs.namespace}"` : " at the cluster scope"}`;
        res.writeHead(403, { "Content-Type": "application/json" });
        res.end(JSON.stringify({ kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message, reason: "Forbidden", code: 403 }));
        req.resume();
        return;
      }
      allowed.push({ attrs, grant });
    }
    const forward = httpsRequest(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: { ...req.headers, host: upstream.host }, ca: options.ca },
      (upstreamRes) => {
        res.writeHead(upstreamRes.statusCode ?? 502, upstreamRes.headers);
        upstreamRes.pipe(res);
      },
    );
    forward.on("error", () => res.destroy());
    res.on("close", () => forward.destroy());
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `https://127.0.0.1:${port}`,
    allowed,
    denied,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
