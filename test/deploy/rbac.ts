// Kubernetes RBAC for one ServiceAccount, evaluated from rendered manifests, and a recording HTTPS proxy in front of
// devkube. devkube enforces RBAC for ServiceAccount tokens from the Roles and bindings stored in it; the proxy records
// what the operator asked and what devkube answered, so a test can see every refusal and every grant the operator
// never used. `authorize` is the same decision computed from the manifests, to cross-check devkube's.
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

export interface RecordedRequest {
  attrs: RequestAttributes;
  /** The upstream status code: 403 means RBAC refused the request. */
  status: number;
}

export interface RecordingProxy {
  url: string;
  /** Every resource request passed through, with devkube's answer. */
  requests: RecordedRequest[];
  /** The requests devkube refused with 403. */
  readonly denied: RequestAttributes[];
  /** Answers the next request that `matches` with 404 NotFound itself, as if its object had gone meanwhile. */
  goneOnce(matches: (attrs: RequestAttributes) => boolean): void;
  close(): Promise<void>;
}

export async function startRecordingProxy(options: { upstream: string; ca: string; cert: string; key: string }): Promise<RecordingProxy> {
  const upstream = new URL(options.upstream);
  const requests: RecordedRequest[] = [];
  let gone: ((attrs: RequestAttributes) => boolean) | undefined;
  const server: Server = createServer({ cert: options.cert, key: options.key }, (req, res) => {
    const attrs = attributesOf(req.method ?? "GET", new URL(req.url ?? "/", upstream));
    if (attrs !== undefined && gone?.(attrs) === true) {
      gone = undefined;
      requests.push({ attrs, status: 404 });
      req.resume();
      const status = { kind: "Status", apiVersion: "v1", status: "Failure", reason: "NotFound", code: 404, message: `${attrs.resource} "${attrs.name ?? ""}" not found` };
      res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify(status));
      return;
    }
    const forward = httpsRequest(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: { ...req.headers, host: upstream.host }, ca: options.ca },
      (upstreamRes) => {
        if (attrs !== undefined) requests.push({ attrs, status: upstreamRes.statusCode ?? 0 });
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
    requests,
    get denied() {
      return requests.filter((r) => r.status === 403).map((r) => r.attrs);
    },
    goneOnce(matches) {
      gone = matches;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
