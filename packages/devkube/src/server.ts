// Over 400 lines on purpose: the whole HTTP surface of devkube (authentication, negotiation, routing, Status errors)
// is one request pipeline; its pieces (discovery, openapi, watch, table, patch) live in their own files.

import type { IncomingMessage, ServerResponse } from "node:http";
import type { TLSSocket } from "node:tls";
import { timingSafeEqual } from "node:crypto";
import type { Logger } from "pino";
import { parse as parseYaml } from "yaml";
import type { Api, DeleteOptions, WriteOptions, WriteResult } from "./api.ts";
import type { FieldValidation } from "./object-checks.ts";
import {
  aggregatedCore,
  aggregatedGroups,
  AGGREGATED_CONTENT_TYPE,
  apiGroup,
  apiGroupList,
  apiResourceList,
  apiVersions,
} from "./discovery.ts";
import { ApiError, badRequest, methodNotAllowed, pathNotFound, unsupportedMediaType } from "./errors.ts";
import { buildOpenApi, type OpenApiDocs } from "./openapi.ts";
import { decodeProtobuf, PROTOBUF_TYPE } from "./protobuf.ts";
import type { Registry } from "./registry.ts";
import { apiVersionOf, type ResourceType } from "./resource-type.ts";
import {
  forbiddenMessage,
  rulesFor,
  serviceAccountUser,
  type Authorizer,
  type RequestAttributes,
  type TokenIssuer,
  type UserInfo,
} from "./rbac.ts";
import { parseFieldSelector, parseLabelSelector } from "./selectors.ts";
import type { Store } from "./store.ts";
import { buildTable, type IncludeObject } from "./table.ts";
import { isObj, metaOf, type Obj } from "./types.ts";
import type { WatchHub } from "./watch.ts";

interface AppDeps {
  api: Api;
  store: Store;
  registry: Registry;
  watches: WatchHub;
  logger: Logger;
  adminToken: string;
  serverAddress: () => string;
  aggregatedDiscovery: boolean;
  tokens: TokenIssuer;
  authorize: Authorizer;
}

const MAX_BODY = 3 * 1024 * 1024;
const VERSION = {
  major: "1",
  minor: "32",
  gitVersion: "v1.32.3-devkube",
  gitCommit: "0000000000000000000000000000000000000000",
  gitTreeState: "clean",
  buildDate: "2026-01-01T00:00:00Z",
  goVersion: "go1.23.6",
  compiler: "gc",
  platform: "linux/amd64",
};

type Negotiated = "json" | "table";

export function createApp(deps: AppDeps): (req: IncomingMessage, res: ServerResponse) => void {
  let openapiCache: { revision: number; rv: number; docs: OpenApiDocs } | undefined;
  const openapi = (): OpenApiDocs => {
    const rv = deps.store.currentRv();
    if (openapiCache && openapiCache.revision === deps.registry.revision) return openapiCache.docs;
    const schemas = new Map<string, unknown>();
    for (const crd of deps.store.list("apiextensions.k8s.io/customresourcedefinitions")) {
      const spec = isObj(crd["spec"]) ? crd["spec"] : {};
      const names = isObj(spec["names"]) ? spec["names"] : {};
      for (const v of Array.isArray(spec["versions"]) ? spec["versions"] : []) {
        if (isObj(v) && isObj(v["schema"]))
          schemas.set(
            `${String(spec["group"])}/${String(v["name"])}/${String(names["plural"])}`,
            v["schema"]["openAPIV3Schema"],
          );
      }
    }
    openapiCache = { revision: deps.registry.revision, rv, docs: buildOpenApi(deps.registry, schemas) };
    return openapiCache.docs;
  };

  return (req, res) => {
    const started = process.hrtime.bigint();
    const url = new URL(req.url ?? "/", "https://devkube.invalid");
    let user: UserInfo | undefined;
    const done = (): void => {
      deps.logger.debug(
        {
          method: req.method,
          path: url.pathname + url.search,
          contentType: req.headers["content-type"],
          accept: req.headers["accept"],
          user: user?.name,
          status: res.statusCode,
          ms: Number(process.hrtime.bigint() - started) / 1e6,
        },
        "request",
      );
    };
    res.on("finish", done);
    handle().catch((err: unknown) => {
      const apiErr =
        err instanceof ApiError
          ? err
          : new ApiError(500, "InternalError", `Internal error occurred: ${(err as Error).message ?? String(err)}`);
      if (!(err instanceof ApiError)) deps.logger.error({ err }, "devkube request failed");
      if (res.headersSent) {
        res.end();
        return;
      }
      sendJson(res, apiErr.code, apiErr.toStatus());
    });

    async function handle(): Promise<void> {
      const path = url.pathname.replace(/\/+$/, "") || "/";
      if (["/healthz", "/readyz", "/livez"].includes(path) || /^\/(healthz|readyz|livez)\//.test(path)) {
        res.writeHead(200, { "Content-Type": "text/plain; charset=utf-8" });
        res.end("ok");
        return;
      }
      if (path === "/version") {
        sendJson(res, 200, VERSION);
        return;
      }
      user = authenticate(req, deps);
      if (!user) throw new ApiError(401, "Unauthorized", "Unauthorized");
      const segs = path.split("/").filter(Boolean).map(decodeURIComponent);
      if (segs[0] === "openapi") return serveOpenApi(segs);
      if (segs[0] === "api" || segs[0] === "apis") return serveApi(segs, user);
      throw pathNotFound();
    }

    function serveOpenApi(segs: string[]): void {
      if (req.method !== "GET") throw methodNotAllowed();
      if (segs[1] !== "v3") throw pathNotFound(); // v2 is requested as protobuf; 404 is what kubectl copes with
      const docs = openapi();
      if (segs.length === 2) return sendJson(res, 200, docs.root);
      const doc = docs.docs.get(segs.slice(2).join("/"));
      if (!doc) throw pathNotFound();
      res.setHeader("Cache-Control", url.searchParams.has("hash") ? "public, immutable" : "no-cache, private");
      sendJson(res, 200, doc);
    }

    async function serveApi(segs: string[], who: UserInfo): Promise<void> {
      const core = segs[0] === "api";
      const wantsAggregated =
        deps.aggregatedDiscovery &&
        /as=APIGroupDiscoveryList/.test(String(req.headers["accept"] ?? "")) &&
        /v=v2(;|,|$)/.test(String(req.headers["accept"] ?? ""));
      if (segs.length === 1) {
        if (req.method !== "GET") throw methodNotAllowed();
        if (wantsAggregated)
          return sendJson(
            res,
            200,
            core ? aggregatedCore(deps.registry) : aggregatedGroups(deps.registry),
            AGGREGATED_CONTENT_TYPE,
          );
        return sendJson(res, 200, core ? apiVersions(deps.serverAddress()) : apiGroupList(deps.registry));
      }
      const group = core ? "" : (segs[1] as string);
      if (!core && segs.length === 2) {
        const g = apiGroup(deps.registry, group);
        if (!g || req.method !== "GET") throw pathNotFound();
        return sendJson(res, 200, g);
      }
      const version = core ? (segs[1] as string) : (segs[2] as string);
      const rest = segs.slice(core ? 2 : 3);
      if (rest.length === 0) {
        const list = apiResourceList(deps.registry, group, version);
        if (!list || req.method !== "GET") throw pathNotFound();
        return sendJson(res, 200, list);
      }
      let ns: string | undefined;
      let r = rest;
      if (
        rest[0] === "namespaces" &&
        rest.length >= 3 &&
        deps.registry.lookup(group, version, rest[2] as string)?.namespaced
      ) {
        ns = rest[1];
        r = rest.slice(2);
      }
      if (r.length > 3) throw pathNotFound();
      const rt = deps.registry.lookup(group, version, r[0] as string);
      if (!rt) throw pathNotFound();
      const name = r[1];
      const sub = r[2];
      if (!rt.namespaced && ns !== undefined) throw pathNotFound();
      if (rt.namespaced && ns === undefined && name !== undefined) throw pathNotFound();
      if (sub !== undefined && !rt.subresources.includes(sub)) throw pathNotFound();
      const verb = verbOf(req.method ?? "GET", name, url.searchParams);
      const attrs: RequestAttributes = {
        verb,
        group,
        resource: rt.plural,
        subresource: sub,
        namespace: rt.namespaced ? ns : undefined,
        name,
      };
      // every authenticated user may ask what it may do (kube's system:basic-user)
      if (![SSAR, SSR, SSRR].includes(rt.storageKey) && !deps.authorize(who, attrs).allowed) {
        throw new ApiError(403, "Forbidden", forbiddenMessage(who, attrs), {
          ...(name ? { name } : {}),
          ...(rt.group ? { group: rt.group } : {}),
          kind: rt.plural,
        });
      }
      if (rt.storageKey === SSAR) return selfSubjectAccessReview(who);
      if (rt.storageKey === SSRR) {
        if (req.method !== "POST") throw methodNotAllowed();
        const body = decodeBody(await readBody(req), req.headers["content-type"]);
        const spec = isObj(body) && isObj(body["spec"]) ? body["spec"] : {};
        const namespace = typeof spec["namespace"] === "string" && spec["namespace"] ? spec["namespace"] : undefined;
        const rules = rulesFor(deps.store, who, namespace);
        const resourceRules = rules
          .filter((r) => r.resources.length > 0)
          .map((r) => ({
            verbs: r.verbs,
            apiGroups: r.apiGroups,
            resources: r.resources,
            ...(r.resourceNames.length > 0 ? { resourceNames: r.resourceNames } : {}),
          }));
        const nonResourceRules = rules
          .filter((r) => r.nonResourceURLs.length > 0)
          .map((r) => ({ verbs: r.verbs, nonResourceURLs: r.nonResourceURLs }));
        return sendJson(res, 201, {
          kind: "SelfSubjectRulesReview",
          apiVersion: "authorization.k8s.io/v1",
          metadata: { creationTimestamp: null },
          spec,
          status: { resourceRules, nonResourceRules, incomplete: false },
        });
      }
      if (rt.storageKey === SSR) {
        if (req.method !== "POST") throw methodNotAllowed();
        await readBody(req);
        return sendJson(res, 201, {
          kind: "SelfSubjectReview",
          apiVersion: "authentication.k8s.io/v1",
          metadata: { creationTimestamp: null },
          status: {
            userInfo: {
              username: who.name,
              groups: who.groups,
              ...(who.serviceAccount ? { uid: who.serviceAccount.uid } : {}),
            },
          },
        });
      }
      if (rt.storageKey === "/serviceaccounts" && sub === "token") return tokenRequest(ns ?? "", name ?? "");
      // as the CRD handler does: every request to a deprecated version carries its warning
      if (rt.deprecationWarning) res.appendHeader("Warning", `299 - ${JSON.stringify(rt.deprecationWarning)}`);
      if (sub === "scale") return serveScale(rt, ns, name ?? "", who);
      if (sub === "binding") {
        if (req.method !== "POST") throw methodNotAllowed();
        const body = decodeBody(await readBody(req), req.headers["content-type"]);
        return sendWrite(deps.api.bind(rt, ns ?? "", name ?? "", body, writeOptions(url.searchParams, req, who)));
      }
      return serveResource(rt, ns, name, sub, who);
    }

    async function serveResource(
      rt: ResourceType,
      ns: string | undefined,
      name: string | undefined,
      sub: string | undefined,
      who: UserInfo,
    ): Promise<void> {
      const q = url.searchParams;
      const method = req.method ?? "GET";
      if (method === "GET") {
        const negotiated = negotiate(String(req.headers["accept"] ?? ""));
        const include = includeObject(q.get("includeObject"));
        if (name === undefined) {
          const label = parseLabelSelector(q.get("labelSelector") ?? undefined);
          const field = parseFieldSelector(q.get("fieldSelector") ?? undefined, rt);
          if (q.get("resourceVersionMatch") && !q.get("resourceVersion") && q.get("sendInitialEvents") !== "true") {
            throw new ApiError(
              422,
              "Invalid",
              `ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided`,
            );
          }
          if (q.get("watch") === "true" || q.get("watch") === "1") {
            const timeout = q.get("timeoutSeconds");
            const initial = q.get("sendInitialEvents") === "true";
            if (
              initial &&
              (q.get("resourceVersionMatch") !== "NotOlderThan" || q.get("allowWatchBookmarks") !== "true")
            ) {
              throw new ApiError(
                422,
                "Invalid",
                `ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled and resourceVersionMatch is NotOlderThan and allowWatchBookmarks is true`,
              );
            }
            deps.watches.serve(req, res, {
              rt,
              namespace: ns,
              label,
              field,
              resourceVersion: q.get("resourceVersion") ?? undefined,
              timeoutSeconds: timeout ? Number(timeout) : undefined,
              bookmarks: q.get("allowWatchBookmarks") === "true",
              table: negotiated === "table" ? include : undefined,
              sendInitialEvents: initial,
            });
            return;
          }
          const limit = q.get("limit") ? Number(q.get("limit")) : undefined;
          const result = deps.api.list(rt, ns, {
            ...(label ? { label } : {}),
            ...(field ? { field } : {}),
            ...(limit !== undefined ? { limit } : {}),
            ...(q.get("continue") ? { continueToken: q.get("continue") as string } : {}),
          });
          if (q.get("resourceVersionMatch") === "Exact" && q.get("resourceVersion") !== result.resourceVersion) {
            throw new ApiError(
              410,
              "Expired",
              `too old resource version: ${q.get("resourceVersion") ?? ""} (${result.resourceVersion})`,
            );
          }
          const listMeta: Obj = { resourceVersion: result.resourceVersion };
          if (result.continueToken) {
            listMeta["continue"] = result.continueToken;
            listMeta["remainingItemCount"] = result.remaining;
          }
          if (negotiated === "table") {
            const extra: Obj = {};
            if (result.continueToken) {
              extra["continue"] = result.continueToken;
              extra["remainingItemCount"] = result.remaining;
            }
            return sendJson(
              res,
              200,
              buildTable(rt, result.items, include, result.resourceVersion, true, extra),
              TABLE_TYPE,
            );
          }
          const items = rt.custom
            ? result.items
            : result.items.map((o) => {
                const c = { ...o };
                delete c["apiVersion"];
                delete c["kind"];
                return c;
              });
          return sendJson(res, 200, { kind: rt.listKind, apiVersion: apiVersionOf(rt), metadata: listMeta, items });
        }
        const obj = deps.api.get(rt, ns ?? "", name);
        if (negotiated === "table")
          return sendJson(
            res,
            200,
            buildTable(rt, [obj], include, String(metaOf(obj)["resourceVersion"] ?? ""), true),
            TABLE_TYPE,
          );
        return sendJson(res, 200, obj);
      }
      // writes to the all-namespaces path of a namespaced resource are not routes on a real server
      if (rt.namespaced && ns === undefined) throw methodNotAllowed();
      const body = await readBody(req);
      const opts = writeOptions(q, req, who);
      if (method === "POST") {
        if (name !== undefined) throw methodNotAllowed();
        return sendWrite(deps.api.create(rt, ns, decodeBody(body, req.headers["content-type"]), opts));
      }
      if (method === "PUT") {
        if (name === undefined) throw methodNotAllowed();
        return sendWrite(deps.api.update(rt, ns, name, sub, decodeBody(body, req.headers["content-type"]), opts));
      }
      if (method === "PATCH") {
        if (name === undefined) throw methodNotAllowed();
        const ct = mediaType(req.headers["content-type"]);
        const force = q.get("force") === "true";
        if (q.has("force") && ct !== "application/apply-patch+yaml") {
          throw new ApiError(
            422,
            "Invalid",
            `PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch`,
            {
              group: "meta.k8s.io",
              kind: "PatchOptions",
              causes: [
                {
                  reason: "FieldValueForbidden",
                  message: "Forbidden: may not be specified for non-apply patch",
                  field: "force",
                },
              ],
            },
          );
        }
        return sendWrite(deps.api.patch(rt, ns, name, sub, ct, body, { ...opts, force }));
      }
      if (method === "DELETE") {
        const delOpts = { ...deleteOptions(q, body, opts.dryRun), user: who };
        if (name === undefined) {
          const label = parseLabelSelector(q.get("labelSelector") ?? undefined);
          const field = parseFieldSelector(q.get("fieldSelector") ?? undefined, rt);
          const items = deps.api.list(rt, ns, { ...(label ? { label } : {}), ...(field ? { field } : {}) }).items;
          const deleted: Obj[] = [];
          for (const o of items) {
            const r = deps.api.delete(rt, String(metaOf(o)["namespace"] ?? ""), String(metaOf(o)["name"]), delOpts);
            if (r.body["kind"] !== "Status") deleted.push(r.body);
          }
          return sendJson(res, 200, {
            kind: rt.listKind,
            apiVersion: apiVersionOf(rt),
            metadata: { resourceVersion: String(deps.store.currentRv()) },
            items: deleted,
          });
        }
        if (sub !== undefined) throw methodNotAllowed();
        return sendWrite(deps.api.delete(rt, ns, name, delOpts));
      }
      throw methodNotAllowed();
    }

    async function serveScale(rt: ResourceType, ns: string | undefined, name: string, who: UserInfo): Promise<void> {
      const method = req.method ?? "GET";
      if (method === "GET") return sendJson(res, 200, deps.api.getScale(rt, ns, name));
      const body = await readBody(req);
      const opts = writeOptions(url.searchParams, req, who);
      if (method === "PUT")
        return sendWrite(
          deps.api.writeScale(rt, ns, name, { put: decodeBody(body, req.headers["content-type"]) }, opts),
        );
      if (method === "PATCH")
        return sendWrite(
          deps.api.writeScale(
            rt,
            ns,
            name,
            { patch: { contentType: mediaType(req.headers["content-type"]), body } },
            opts,
          ),
        );
      throw methodNotAllowed();
    }

    async function selfSubjectAccessReview(who: UserInfo): Promise<void> {
      if (req.method !== "POST") throw methodNotAllowed();
      const body = decodeBody(await readBody(req), req.headers["content-type"]);
      const spec = isObj(body) && isObj(body["spec"]) ? body["spec"] : {};
      const ra = isObj(spec["resourceAttributes"]) ? spec["resourceAttributes"] : undefined;
      let allowed = true;
      if (ra) {
        const str = (k: string) => (typeof ra[k] === "string" && ra[k] !== "" ? (ra[k] as string) : undefined);
        allowed = deps.authorize(who, {
          verb: str("verb") ?? "",
          group: str("group") ?? "",
          resource: str("resource") ?? "",
          subresource: str("subresource"),
          namespace: str("namespace"),
          name: str("name"),
        }).allowed;
      } else if (!who.groups.includes("system:masters")) {
        allowed =
          isObj(spec["nonResourceAttributes"]) &&
          /^\/(api|apis|openapi|version|healthz|readyz|livez)(\/|$)/.test(
            String(spec["nonResourceAttributes"]["path"] ?? ""),
          );
      }
      sendJson(res, 201, {
        kind: "SelfSubjectAccessReview",
        apiVersion: "authorization.k8s.io/v1",
        metadata: {},
        spec,
        status: { allowed, ...(allowed ? { reason: "devkube RBAC" } : {}) },
      });
    }

    async function tokenRequest(ns: string, name: string): Promise<void> {
      if (req.method !== "POST") throw methodNotAllowed();
      const body = decodeBody(await readBody(req), req.headers["content-type"]);
      const rt = deps.registry.lookup("", "v1", "serviceaccounts");
      if (!rt) throw pathNotFound();
      const sa = deps.api.get(rt, ns, name);
      const spec = isObj(body) && isObj(body["spec"]) ? body["spec"] : {};
      const seconds = typeof spec["expirationSeconds"] === "number" ? spec["expirationSeconds"] : 3600;
      if (seconds < 600)
        throw new ApiError(
          422,
          "Invalid",
          `TokenRequest.authentication.k8s.io "${name}" is invalid: spec.expirationSeconds: Invalid value: ${seconds}: may not specify a duration less than 10 minutes`,
        );
      const issued = deps.tokens.issue(ns, name, String(metaOf(sa)["uid"]), seconds);
      sendJson(res, 201, {
        kind: "TokenRequest",
        apiVersion: "authentication.k8s.io/v1",
        metadata: { name, namespace: ns, creationTimestamp: null },
        spec: { audiences: spec["audiences"] ?? [], expirationSeconds: seconds, boundObjectRef: null },
        status: issued,
      });
    }

    function sendWrite(result: WriteResult): void {
      for (const w of result.warnings) res.appendHeader("Warning", `299 - ${JSON.stringify(w)}`);
      sendJson(res, result.code, result.body);
    }
  };
}

const TABLE_TYPE = "application/json;as=Table;v=v1;g=meta.k8s.io";

function verbOf(method: string, name: string | undefined, q: URLSearchParams): string {
  switch (method) {
    case "GET":
      return name ? "get" : q.get("watch") === "true" || q.get("watch") === "1" ? "watch" : "list";
    case "POST":
      return "create";
    case "PUT":
      return "update";
    case "PATCH":
      return "patch";
    case "DELETE":
      return name ? "delete" : "deletecollection";
    default:
      return method.toLowerCase();
  }
}

const SSAR = "authorization.k8s.io/selfsubjectaccessreviews";
const SSR = "authentication.k8s.io/selfsubjectreviews";
const SSRR = "authorization.k8s.io/selfsubjectrulesreviews";

/** The admin token (system:masters, may impersonate) or a ServiceAccount token whose account still exists. */
function authenticate(req: IncomingMessage, deps: AppDeps): UserInfo | undefined {
  const header = req.headers["authorization"];
  if (typeof header !== "string") return certificateUser(req, deps);
  const m = /^Bearer\s+(.+)$/i.exec(header.trim());
  if (!m) return undefined;
  const token = m[1] as string;
  const given = Buffer.from(token);
  const want = Buffer.from(deps.adminToken);
  if (given.length === want.length && timingSafeEqual(given, want)) {
    const admin: UserInfo = { name: "devkube-admin", groups: ["system:masters", "system:authenticated"] };
    return impersonated(req, deps) ?? admin;
  }
  const claims = deps.tokens.verify(token);
  if (!claims) return undefined;
  const sa = deps.store.get("/serviceaccounts", claims.namespace, claims.name);
  if (!sa || metaOf(sa)["uid"] !== claims.uid) return undefined;
  return serviceAccountUser(claims.namespace, claims.name, claims.uid);
}

/** A client certificate signed by devkube's CA: user = CN, groups = O (kube's x509 authenticator). */
function certificateUser(req: IncomingMessage, deps: AppDeps): UserInfo | undefined {
  const socket = req.socket as TLSSocket;
  if (typeof socket.getPeerCertificate !== "function" || !socket.authorized) return undefined;
  const subject = socket.getPeerCertificate().subject as Record<string, string | string[] | undefined> | undefined;
  const cn = subject?.["CN"];
  if (typeof cn !== "string" || !cn) return undefined;
  const o = subject?.["O"];
  const groups = [...(Array.isArray(o) ? o : typeof o === "string" ? [o] : []), "system:authenticated"];
  const user: UserInfo = { name: cn, groups };
  return groups.includes("system:masters") ? (impersonated(req, deps) ?? user) : user;
}

function impersonated(req: IncomingMessage, deps: AppDeps): UserInfo | undefined {
  const as = req.headers["impersonate-user"];
  if (typeof as !== "string" || !as) return undefined;
  const sa = /^system:serviceaccount:([^:]+):([^:]+)$/.exec(as);
  if (sa) {
    const obj = deps.store.get("/serviceaccounts", sa[1] as string, sa[2] as string);
    return serviceAccountUser(sa[1] as string, sa[2] as string, obj ? String(metaOf(obj)["uid"]) : "");
  }
  const raw = req.headers["impersonate-group"];
  const groups = (Array.isArray(raw) ? raw : typeof raw === "string" ? raw.split(",") : [])
    .map((g) => g.trim())
    .filter(Boolean);
  return { name: as, groups: [...groups, "system:authenticated"] };
}

function negotiate(accept: string): Negotiated {
  if (!accept.trim()) return "json";
  for (const part of accept.split(",")) {
    const [type, ...params] = part.split(";").map((s) => s.trim());
    const p = Object.fromEntries(params.map((x) => x.split("=").map((s) => s.trim()) as [string, string]));
    if (
      type === "application/json" &&
      p["as"] === "Table" &&
      p["g"] === "meta.k8s.io" &&
      (p["v"] === "v1" || p["v"] === "v1beta1")
    )
      return "table";
    if ((type === "application/json" && !p["as"]) || type === "*/*" || type === "application/*") return "json";
  }
  throw new ApiError(
    406,
    "NotAcceptable",
    `only the following media types are accepted: application/json, application/json;as=Table;v=v1;g=meta.k8s.io`,
  );
}

function includeObject(v: string | null): IncludeObject {
  if (v === "None" || v === "Object") return v;
  return "Metadata";
}

function mediaType(header: string | undefined): string {
  return (header ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
}

function decodeBody(body: Buffer, contentType: string | undefined): unknown {
  const ct = mediaType(contentType);
  if (ct === "application/json" || ct === "" || ct === "*/*") {
    try {
      return JSON.parse(body.toString("utf8"));
    } catch (err) {
      throw badRequest(`error decoding body: ${(err as Error).message}`);
    }
  }
  if (ct === PROTOBUF_TYPE) return decodeProtobuf(body);
  if (ct === "application/yaml") {
    try {
      return parseYaml(body.toString("utf8"));
    } catch (err) {
      throw badRequest(`error decoding YAML: ${(err as Error).message}`);
    }
  }
  throw unsupportedMediaType(ct, ["application/json", "application/yaml", PROTOBUF_TYPE]);
}

function writeOptions(q: URLSearchParams, req: IncomingMessage, user: UserInfo): WriteOptions {
  const dryRun = q.getAll("dryRun");
  for (const d of dryRun) if (d !== "All") throw new ApiError(400, "BadRequest", `Invalid dry run value: ${d}`);
  const fv = q.get("fieldValidation") ?? "Warn";
  if (!["Strict", "Warn", "Ignore"].includes(fv))
    throw badRequest(`fieldValidation: Unsupported value: "${fv}": supported values: "Ignore", "Strict", "Warn"`);
  const fm = q.get("fieldManager");
  if (fm !== null && fm.length > 128) throw badRequest(`fieldManager: Too long: may not be more than 128 bytes`);
  return {
    dryRun: dryRun.length > 0,
    fieldManager: fm ?? undefined,
    userAgent: String(req.headers["user-agent"] ?? ""),
    fieldValidation: fv as FieldValidation,
    user,
  };
}

function deleteOptions(q: URLSearchParams, body: Buffer, dryRun: boolean): DeleteOptions {
  const opts: DeleteOptions = { dryRun };
  const text = body.toString("utf8").trim();
  if (text) {
    let parsed: unknown;
    try {
      // client-go sends it as protobuf when the client prefers protobuf (helm's release storage does)
      parsed = body.subarray(0, 4).toString("latin1") === "k8s\0" ? decodeProtobuf(body) : JSON.parse(text);
    } catch (err) {
      if (err instanceof ApiError) throw err;
      throw badRequest(`error decoding DeleteOptions: ${(err as Error).message}`);
    }
    if (isObj(parsed)) {
      if (typeof parsed["propagationPolicy"] === "string") opts.propagationPolicy = parsed["propagationPolicy"];
      if (typeof parsed["orphanDependents"] === "boolean") opts.orphanDependents = parsed["orphanDependents"];
      if (isObj(parsed["preconditions"])) {
        const p = parsed["preconditions"];
        opts.preconditions = {
          ...(typeof p["uid"] === "string" ? { uid: p["uid"] } : {}),
          ...(typeof p["resourceVersion"] === "string" ? { resourceVersion: p["resourceVersion"] } : {}),
        };
      }
      if (Array.isArray(parsed["dryRun"]) && parsed["dryRun"].includes("All")) opts.dryRun = true;
    }
  }
  const pp = q.get("propagationPolicy");
  if (pp) opts.propagationPolicy = pp;
  const od = q.get("orphanDependents");
  if (od) opts.orphanDependents = od === "true";
  return opts;
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY)
      throw new ApiError(413, "RequestEntityTooLarge", "the server has received a request that is too large");
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

function sendJson(res: ServerResponse, code: number, body: unknown, contentType = "application/json"): void {
  const text = JSON.stringify(body);
  res.writeHead(code, {
    "Content-Type": contentType,
    "Content-Length": Buffer.byteLength(text),
    "Cache-Control": (res.getHeader("Cache-Control") as string) ?? "no-cache, private",
  });
  res.end(text);
}
