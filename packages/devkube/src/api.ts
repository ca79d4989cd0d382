// Over 400 lines on purpose: the object semantics of one registry + store (create, update, patch, delete with
// finalizers and garbage collection, list and watch with resourceVersions) depend on each other's invariants, which
// are easier to keep in one file than across several.

import { randomBytes, randomUUID } from "node:crypto";
import { parse as parseYaml } from "yaml";
import { AdmissionDenied, PolicyAdmission, type AdmissionRequest } from "./admission.ts";
import type { ConversionWebhooks } from "./conversion-webhook.ts";
import { crdResourceTypes, crdStatus, CRD_FINALIZER, defaultCrd, validateCrd } from "./crd.ts";
import {
  ApiError,
  badRequest,
  conflict,
  forbidden,
  internal,
  invalid,
  notFound,
  qualified,
  unsupportedMediaType,
} from "./errors.ts";
import { serverSideApply } from "./last-applied.ts";
import { decodeObject, pruneUnknown, validateMeta, type FieldValidation } from "./object-checks.ts";
import {
  applyJsonPatch,
  applyMergePatch,
  applyStrategicMergePatch,
  PatchError,
  recordUpdate,
  type ListTypes,
} from "./patch/index.ts";
import { errorBody } from "./schema/index.ts";
import { evaluateJsonPath } from "./jsonpath.ts";
import type { UserInfo } from "./rbac.ts";
import type { Registry } from "./registry.ts";
import { apiVersionOf, type ResourceType } from "./resource-type.ts";
import type { Selector } from "./selectors.ts";
import type { Store } from "./store.ts";
import { clone, isObj, jsonEqual, metaOf, str, timeNow, type Obj } from "./types.ts";

// Object semantics shared by every resource: what a kube-apiserver registry + etcd store do.

/** `user`: who asks; ValidatingAdmissionPolicies are evaluated for requests that name one (not for devkube's own writes). */
export interface WriteOptions {
  dryRun: boolean;
  fieldManager: string | undefined;
  userAgent: string;
  fieldValidation: FieldValidation;
  user?: UserInfo;
}
export interface WriteResult {
  code: number;
  body: Obj;
  warnings: string[];
}
export interface DeleteOptions {
  propagationPolicy?: string;
  orphanDependents?: boolean;
  preconditions?: { uid?: string; resourceVersion?: string };
  dryRun: boolean;
  user?: UserInfo;
}
interface ListOptions {
  label?: Selector;
  field?: Selector;
  limit?: number;
  continueToken?: string;
}
interface ListResult {
  items: Obj[];
  resourceVersion: string;
  continueToken?: string;
  remaining?: number;
}

const SYSTEM_META = ["uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"];

export class Api {
  private readonly store: Store;
  private readonly registry: Registry;
  private readonly changed: () => void;
  private readonly admission: PolicyAdmission;

  private readonly webhooks: ConversionWebhooks | undefined;

  constructor(store: Store, registry: Registry, changed: () => void, webhooks?: ConversionWebhooks) {
    this.store = store;
    this.registry = registry;
    this.changed = changed;
    this.webhooks = webhooks;
    this.admission = new PolicyAdmission(store, registry, (from, to, obj) =>
      this.render(to, this.toStorage(from, clone(obj))),
    );
  }

  /**
   * ValidatingAdmissionPolicies for a request made by a user: warnings, or an AdmissionDenied thrown. The request is
   * built only when a policy exists (rendering the old object of a delete is not free).
   */
  private admit(
    opts: { user?: UserInfo; dryRun: boolean },
    build: () => Omit<AdmissionRequest, "user" | "dryRun">,
  ): string[] {
    if (!opts.user || !this.admission.hasPolicies()) return [];
    return this.admission.admit({ ...build(), user: opts.user, dryRun: opts.dryRun });
  }

  /** Stored form → the form served at rt's group/version (conversion, defaulting on read). */
  render(rt: ResourceType, stored: Obj): Obj {
    let o = clone(stored);
    if (rt.fromStorage) o = rt.fromStorage(o);
    o = { apiVersion: apiVersionOf(rt), kind: rt.kind, ...o };
    o["apiVersion"] = apiVersionOf(rt);
    o["kind"] = rt.kind;
    if (rt.schema) {
      // like the apiserver reading from etcd: pruned and defaulted for the version being served
      try {
        o = rt.schema.applyDefaults(rt.schema.prune(o).object);
      } catch {
        /* serve as stored */
      }
    }
    return o;
  }

  private toStorage(rt: ResourceType, wire: Obj): Obj {
    return rt.toStorage ? rt.toStorage(wire) : wire;
  }

  namespaceOf(rt: ResourceType, ns: string | undefined): string {
    return rt.namespaced ? (ns ?? "") : "";
  }

  get(rt: ResourceType, ns: string, name: string): Obj {
    const stored = this.store.get(rt.storageKey, this.namespaceOf(rt, ns), name);
    if (!stored) throw notFound(rt, name);
    return this.render(rt, stored);
  }

  list(rt: ResourceType, ns: string | undefined, opts: ListOptions): ListResult {
    const resourceVersion = String(this.store.currentRv());
    let start: string | undefined;
    if (opts.continueToken) {
      try {
        const t = JSON.parse(Buffer.from(opts.continueToken, "base64url").toString("utf8")) as { start?: unknown };
        if (typeof t.start !== "string") throw new Error("bad");
        start = t.start;
      } catch {
        throw badRequest("continue key is not valid: illegal base64 data at input byte 0");
      }
    }
    // Only the page is rendered (a copy, converted, pruned, defaulted): a paginated walk of N objects costs O(N)
    // renders, not O(N) per page.
    const stored = this.store.sorted(rt.storageKey, rt.namespaced ? ns : undefined);
    let i = start === undefined ? 0 : firstAfter(stored, start);
    const matches = (o: Obj) => (!opts.label || opts.label(o)) && (!opts.field || opts.field(o));
    const limit = opts.limit !== undefined && opts.limit > 0 ? opts.limit : Infinity;
    const items: Obj[] = [];
    for (; i < stored.length && items.length < limit; i++) {
      const o = this.render(rt, (stored[i] as [string, Obj])[1]);
      if (matches(o)) items.push(o);
    }
    // A continue token only when a further object matches; as the apiserver, remainingItemCount only without selectors.
    let more = false;
    for (let j = i; j < stored.length && !more; j++) more = matches(this.render(rt, (stored[j] as [string, Obj])[1]));
    if (!more) return { items, resourceVersion };
    const token = Buffer.from(
      JSON.stringify({ rv: resourceVersion, start: keyOf(items[items.length - 1] as Obj) }),
    ).toString("base64url");
    return {
      items,
      resourceVersion,
      continueToken: token,
      ...(opts.label || opts.field ? {} : { remaining: stored.length - i }),
    };
  }

  // ---------------------------------------------------------------- create

  create(rt: ResourceType, ns: string | undefined, body: unknown, opts: WriteOptions): WriteResult {
    const obj = decodeObject(rt, body, ns);
    const meta = metaOf(obj);
    if (meta["resourceVersion"] !== undefined && meta["resourceVersion"] !== "") {
      throw internal("resourceVersion should not be set on objects to be created");
    }
    if (!meta["name"] && typeof meta["generateName"] === "string" && meta["generateName"]) {
      meta["name"] = `${meta["generateName"]}${randomName()}`;
    }
    const name = str(meta["name"]) ?? "";
    if (!name)
      throw invalid(rt.kind, rt.group, "", [
        {
          type: "FieldValueRequired",
          field: "metadata.name",
          message: "Required value: name or generateName is required",
        },
      ]);
    this.checkNamespaceWritable(rt, meta, name);
    this.checkCrdNotTerminating(rt);
    if (this.store.get(rt.storageKey, this.namespaceOf(rt, ns), name)) {
      throw new ApiError(409, "AlreadyExists", `${qualified(rt)} "${name}" already exists`, {
        name,
        ...(rt.group ? { group: rt.group } : {}),
        kind: rt.plural,
      });
    }
    return this.commit(rt, undefined, obj, opts, { subresource: undefined, managed: "update" });
  }

  private checkCrdNotTerminating(rt: ResourceType): void {
    if (!rt.crdName) return;
    const crd = this.store.get("apiextensions.k8s.io/customresourcedefinitions", "", rt.crdName);
    if (crd && metaOf(crd)["deletionTimestamp"]) {
      throw new ApiError(405, "MethodNotAllowed", `create not allowed while custom resource definition is terminating`);
    }
  }

  private checkNamespaceWritable(rt: ResourceType, meta: Obj, name: string): void {
    if (!rt.namespaced) return;
    const ns = str(meta["namespace"]) ?? "";
    const nsObj = this.store.get("/namespaces", "", ns);
    if (!nsObj) throw notFound({ group: "", plural: "namespaces" }, ns);
    if (metaOf(nsObj)["deletionTimestamp"]) {
      throw forbidden(rt, name, `unable to create new content in namespace ${ns} because it is being terminated`);
    }
  }

  // ---------------------------------------------------------------- update (PUT)

  update(
    rt: ResourceType,
    ns: string | undefined,
    name: string,
    subresource: string | undefined,
    body: unknown,
    opts: WriteOptions,
  ): WriteResult {
    const obj = decodeObject(rt, body, ns);
    const meta = metaOf(obj);
    if (meta["name"] !== undefined && meta["name"] !== name) {
      throw badRequest(`the name of the object (${String(meta["name"])}) does not match the name on the URL (${name})`);
    }
    meta["name"] = name;
    const stored = this.store.get(rt.storageKey, this.namespaceOf(rt, ns), name);
    if (!stored) throw notFound(rt, name);
    if (meta["uid"] !== undefined && meta["uid"] !== "" && meta["uid"] !== metaOf(stored)["uid"]) {
      throw conflict(
        rt,
        name,
        `Precondition failed: UID in precondition: ${String(meta["uid"])}, UID in object meta: ${String(metaOf(stored)["uid"])}`,
      );
    }
    const rv = meta["resourceVersion"];
    if (rv === undefined || rv === "") {
      if (rt.custom || rt.storageKey === "apiextensions.k8s.io/customresourcedefinitions") {
        throw invalid(rt.kind, rt.group, name, [
          {
            type: "FieldValueInvalid",
            field: "metadata.resourceVersion",
            message: "Invalid value: 0x0: must be specified for an update",
          },
        ]);
      }
    } else if (rv !== metaOf(stored)["resourceVersion"]) {
      throw conflict(rt, name);
    }
    return this.commit(rt, stored, obj, opts, { subresource, managed: "update" });
  }

  // ---------------------------------------------------------------- patch

  patch(
    rt: ResourceType,
    ns: string | undefined,
    name: string,
    subresource: string | undefined,
    contentType: string,
    body: Buffer,
    opts: WriteOptions & { force: boolean },
  ): WriteResult {
    const namespace = this.namespaceOf(rt, ns);
    const stored = this.store.get(rt.storageKey, namespace, name);
    const text = body.toString("utf8");
    if (contentType === "application/apply-patch+yaml") {
      if (!opts.fieldManager) {
        throw invalid("PatchOptions", "meta.k8s.io", "", [
          { type: "FieldValueRequired", field: "fieldManager", message: "Required value: is required for apply patch" },
        ]);
      }
      let applied: unknown;
      try {
        applied = parseYaml(text);
      } catch (err) {
        throw badRequest(`error decoding YAML: ${(err as Error).message}`);
      }
      if (!isObj(applied)) throw badRequest("error decoding patch: the body is not a YAML/JSON object");
      const av = applied["apiVersion"];
      const kind = applied["kind"];
      if (av !== apiVersionOf(rt) || kind !== rt.kind) {
        throw badRequest(
          `the API version in the data (${String(av ?? "")}) does not match the expected API version (${apiVersionOf(rt)})`,
        );
      }
      const ameta = metaOf(applied);
      if (ameta["name"] !== undefined && ameta["name"] !== name)
        throw badRequest(
          `the name of the object (${String(ameta["name"])}) does not match the name on the URL (${name})`,
        );
      if (rt.namespaced && ameta["namespace"] !== undefined && ameta["namespace"] !== namespace) {
        throw badRequest("the namespace of the provided object does not match the namespace sent on the request");
      }
      ameta["name"] = name;
      if (rt.namespaced) ameta["namespace"] = namespace;
      const live = stored ? this.render(rt, stored) : undefined;
      if (
        live &&
        ameta["resourceVersion"] !== undefined &&
        ameta["resourceVersion"] !== metaOf(live)["resourceVersion"]
      )
        throw conflict(rt, name);
      const applyArgs = {
        live,
        applied,
        manager: opts.fieldManager,
        force: opts.force,
        now: timeNow(),
        ...(subresource === "status" ? { subresource: "status" as const } : {}),
        ...listTypesOf(rt),
      };
      const result = this.patchLib(() => serverSideApply(applyArgs));
      const next = result.object;
      if (!stored) {
        if (subresource) throw notFound(rt, name);
        delete metaOf(next)["resourceVersion"];
        this.checkNamespaceWritable(rt, metaOf(next), name);
        this.checkCrdNotTerminating(rt);
        return this.commit(rt, undefined, next, opts, { subresource: undefined, managed: "keep" });
      }
      return this.commit(rt, stored, next, opts, { subresource, managed: "keep" });
    }
    if (!stored) throw notFound(rt, name);
    const live = this.render(rt, stored);
    let patchBody: unknown;
    try {
      patchBody = JSON.parse(text);
    } catch (err) {
      throw badRequest(`error decoding patch: ${(err as Error).message}`);
    }
    let next: unknown;
    switch (contentType) {
      case "application/json-patch+json":
        if (!Array.isArray(patchBody))
          throw badRequest("json: cannot unmarshal object into Go value of type jsonpatch.Patch");
        if (patchBody.length > 10000)
          throw new ApiError(
            413,
            "RequestEntityTooLarge",
            `The request is too large: the allowed number of operations in a JSON patch is 10000, but found ${patchBody.length}`,
          );
        next = this.patchLib(() => applyJsonPatch(live, patchBody));
        break;
      case "application/merge-patch+json":
        if (!isObj(patchBody)) throw badRequest("error decoding patch: the patch is not a JSON object");
        next = this.patchLib(() => applyMergePatch(live, patchBody));
        break;
      case "application/strategic-merge-patch+json":
        if (rt.custom)
          throw unsupportedMediaType(contentType, [
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/apply-patch+yaml",
          ]);
        if (!isObj(patchBody)) throw badRequest("error decoding patch: the patch is not a JSON object");
        next = this.patchLib(() => applyStrategicMergePatch(live, patchBody, rt.kindKey));
        break;
      default:
        throw unsupportedMediaType(contentType, [
          "application/json-patch+json",
          "application/merge-patch+json",
          "application/apply-patch+yaml",
          ...(rt.custom ? [] : ["application/strategic-merge-patch+json"]),
        ]);
    }
    if (!isObj(next)) throw badRequest("the patch did not produce an object");
    const nmeta = metaOf(next);
    if (nmeta["name"] !== name)
      throw badRequest(
        `the name of the object (${String(nmeta["name"] ?? "")}) does not match the name on the URL (${name})`,
      );
    if (nmeta["resourceVersion"] !== metaOf(live)["resourceVersion"]) {
      if (nmeta["resourceVersion"] === undefined || nmeta["resourceVersion"] === "")
        nmeta["resourceVersion"] = metaOf(live)["resourceVersion"];
      else throw conflict(rt, name);
    }
    const decoded = decodeObject(rt, next, ns);
    return this.commit(rt, stored, decoded, opts, { subresource, managed: "update" });
  }

  private patchLib<T>(fn: () => T): T {
    try {
      return fn();
    } catch (err) {
      if (err instanceof PatchError) {
        const causes = err.causes?.map((c) => ({ reason: c.type, message: c.message, field: c.field }));
        const reasonFor: Record<number, string> = { 400: "BadRequest", 409: "Conflict", 422: "Invalid" };
        throw new ApiError(
          err.status,
          err.reason || reasonFor[err.status] || "BadRequest",
          err.message,
          causes ? { causes } : undefined,
          { cause: err },
        );
      }
      if (err instanceof ApiError) throw err;
      throw badRequest((err as Error).message);
    }
  }

  // ---------------------------------------------------------------- binding subresource

  /**
   * POST pods/NAME/binding, the scheduler's way to put a pod on a Node (upstream BindingREST): sets spec.nodeName
   * (once: a bound pod is a 409) and PodScheduled=True in one write, merges the Binding's annotations, answers a
   * Status Success 201. The Node need not exist: the API server does not look (kube-controller-manager's pod GC
   * deletes pods bound to a Node that never appears).
   */
  bind(rt: ResourceType, ns: string, name: string, body: unknown, opts: WriteOptions): WriteResult {
    const binding = isObj(body) ? body : {};
    const bmeta = isObj(binding["metadata"]) ? binding["metadata"] : {};
    if (binding["kind"] !== undefined && binding["kind"] !== "Binding")
      throw badRequest(`not a Binding object: ${String(binding["kind"])}`);
    if (bmeta["name"] !== name) throw badRequest("name in URL does not match name in Binding object");
    const target = isObj(binding["target"]) ? binding["target"] : {};
    const errors: string[] = [];
    const kind = str(target["kind"]) ?? "";
    if (kind !== "" && kind !== "Node")
      errors.push(`target.kind: Unsupported value: ${JSON.stringify(kind)}: supported values: "Node", "<empty>"`);
    const node = str(target["name"]) ?? "";
    if (node === "") errors.push("target.name: Required value");
    // upstream returns the field errors as a plain error, which the API server answers as a 500
    if (errors.length > 0) throw internal(errors.length === 1 ? errors[0]! : `[${errors.join(", ")}]`);
    const stored = this.store.get(rt.storageKey, ns, name);
    if (!stored) throw notFound(rt, name);
    const meta = metaOf(stored);
    const refuse = (why: string) => conflict({ group: "", plural: "pods/binding" }, name, why);
    if (bmeta["uid"] && bmeta["uid"] !== meta["uid"])
      throw refuse(
        `Precondition failed: UID in precondition: ${String(bmeta["uid"])}, UID in object meta: ${String(meta["uid"])}`,
      );
    if (bmeta["resourceVersion"] && bmeta["resourceVersion"] !== meta["resourceVersion"])
      throw refuse(
        `Precondition failed: ResourceVersion in precondition: ${String(bmeta["resourceVersion"])}, ResourceVersion in meta: ${String(meta["resourceVersion"])}`,
      );
    if (meta["deletionTimestamp"]) throw refuse(`pod ${name} is being deleted, cannot be assigned to a host`);
    const next = this.render(rt, stored);
    const spec = isObj(next["spec"]) ? next["spec"] : {};
    if (spec["nodeName"]) throw refuse(`pod ${name} is already assigned to node ${JSON.stringify(spec["nodeName"])}`);
    if (Array.isArray(spec["schedulingGates"]) && spec["schedulingGates"].length > 0)
      throw refuse(`pod ${name} has non-empty .spec.schedulingGates`);
    spec["nodeName"] = node;
    if (isObj(bmeta["annotations"])) {
      const nmeta = metaOf(next);
      nmeta["annotations"] = { ...(isObj(nmeta["annotations"]) ? nmeta["annotations"] : {}), ...bmeta["annotations"] };
    }
    const status = isObj(next["status"]) ? next["status"] : {};
    const conditions = (Array.isArray(status["conditions"]) ? status["conditions"] : []).filter(
      (c) => !(isObj(c) && c["type"] === "PodScheduled"),
    );
    conditions.push({ type: "PodScheduled", status: "True", lastProbeTime: null, lastTransitionTime: timeNow() });
    next["status"] = { ...status, conditions };
    this.commit(rt, stored, next, opts, { subresource: "binding", managed: "keep" });
    return {
      code: 201,
      body: { kind: "Status", apiVersion: "v1", metadata: {}, status: "Success", code: 201 },
      warnings: [],
    };
  }

  // ---------------------------------------------------------------- scale subresource

  /** autoscaling/v1 Scale view of a CR whose CRD declares subresources.scale. */
  getScale(rt: ResourceType, ns: string | undefined, name: string): Obj {
    return this.scaleOf(rt, this.get(rt, ns ?? "", name));
  }

  private scaleOf(rt: ResourceType, obj: Obj): Obj {
    const scale = rt.scale;
    if (!scale) throw notFoundPath();
    const meta = metaOf(obj);
    const first = (path: string | undefined) => (path ? evaluateJsonPath(path, obj)[0] : undefined);
    const selector = first(scale.labelSelectorPath);
    const status: Obj = { replicas: Number(first(scale.statusReplicasPath) ?? 0) };
    if (typeof selector === "string") status["selector"] = selector;
    return {
      kind: "Scale",
      apiVersion: "autoscaling/v1",
      metadata: {
        name: meta["name"],
        ...(rt.namespaced ? { namespace: meta["namespace"] } : {}),
        uid: meta["uid"],
        resourceVersion: meta["resourceVersion"],
        creationTimestamp: meta["creationTimestamp"],
      },
      spec: { replicas: Number(first(scale.specReplicasPath) ?? 0) },
      status,
    };
  }

  /** PUT or PATCH of …/scale: the new Scale's spec.replicas lands at specReplicasPath of the CR. */
  writeScale(
    rt: ResourceType,
    ns: string | undefined,
    name: string,
    change: { put?: unknown; patch?: { contentType: string; body: Buffer } },
    opts: WriteOptions,
  ): WriteResult {
    const scale = rt.scale;
    if (!scale) throw notFoundPath();
    const stored = this.store.get(rt.storageKey, this.namespaceOf(rt, ns), name);
    if (!stored) throw notFound(rt, name);
    const current = this.scaleOf(rt, this.render(rt, stored));
    let next: unknown = change.put;
    if (change.patch) {
      let body: unknown;
      try {
        body = JSON.parse(change.patch.body.toString("utf8"));
      } catch (err) {
        throw badRequest(`error decoding patch: ${(err as Error).message}`);
      }
      if (change.patch.contentType === "application/json-patch+json")
        next = this.patchLib(() => applyJsonPatch(current, body));
      else if (
        change.patch.contentType === "application/merge-patch+json" ||
        change.patch.contentType === "application/strategic-merge-patch+json"
      )
        next = this.patchLib(() => applyMergePatch(current, body));
      else
        throw unsupportedMediaType(change.patch.contentType, [
          "application/json-patch+json",
          "application/merge-patch+json",
          "application/strategic-merge-patch+json",
        ]);
    }
    if (!isObj(next)) throw badRequest('Scale in version "v1" cannot be handled as a Scale: the body is not an object');
    const rv = metaOf(next)["resourceVersion"];
    if (rv !== undefined && rv !== "" && rv !== metaOf(stored)["resourceVersion"]) throw conflict(rt, name);
    const replicas = isObj(next["spec"]) ? next["spec"]["replicas"] : undefined;
    if (typeof replicas !== "number" || !Number.isInteger(replicas) || replicas < 0) {
      throw invalid("Scale", "autoscaling", name, [
        {
          type: "FieldValueInvalid",
          field: "spec.replicas",
          message: `Invalid value: ${JSON.stringify(replicas ?? null)}: must be greater than or equal to 0`,
        },
      ]);
    }
    const obj = this.render(rt, stored);
    const path = scale.specReplicasPath.replace(/^\./, "").split(".");
    let cursor: Obj = obj;
    for (const key of path.slice(0, -1)) {
      if (!isObj(cursor[key])) cursor[key] = {};
      cursor = cursor[key] as Obj;
    }
    cursor[path[path.length - 1] as string] = replicas;
    // admitted as what it is: an UPDATE of the scale subresource, with autoscaling/v1 Scale objects
    const warnings = this.admit(opts, () => ({
      operation: "UPDATE",
      rt,
      subresource: "scale",
      namespace: this.namespaceOf(rt, ns),
      name,
      object: { ...current, spec: { replicas } },
      oldObject: current,
      options: { kind: "UpdateOptions", apiVersion: "meta.k8s.io/v1" },
    }));
    const result = this.commit(rt, stored, obj, opts, { subresource: undefined, managed: "update", admitted: true });
    return { ...result, body: this.scaleOf(rt, result.body), warnings: [...warnings, ...result.warnings] };
  }

  // ---------------------------------------------------------------- the write path

  /**
   * Everything create/update/patch share: status isolation, kind rules, schema pruning,
   * defaulting and validation, generation, finalizer rules, managedFields, no-op detection,
   * finalizer-driven removal, and the store write.
   */
  private commit(
    rt: ResourceType,
    stored: Obj | undefined,
    next: Obj,
    opts: WriteOptions,
    how: { subresource: string | undefined; managed: "update" | "keep"; admitted?: boolean },
  ): WriteResult {
    const warnings: string[] = [];
    const old = stored ? this.render(rt, stored) : undefined;
    const meta = metaOf(next);
    const name = String(meta["name"]);
    if (how.subresource !== undefined && !rt.subresources.includes(how.subresource)) throw notFoundPath();
    if (rt.namespaced) meta["namespace"] = meta["namespace"] ?? "";
    else delete meta["namespace"];

    const hasStatus = rt.subresources.includes("status");
    if (old) {
      const ometa = metaOf(old);
      for (const k of SYSTEM_META) {
        if (ometa[k] === undefined) delete meta[k];
        else meta[k] = ometa[k];
      }
      if (meta["managedFields"] === undefined && ometa["managedFields"] !== undefined)
        meta["managedFields"] = ometa["managedFields"];
      if (how.subresource === "status") {
        // a /status write changes status only (and managedFields)
        const status = next["status"];
        const keepManaged = meta["managedFields"];
        for (const k of Object.keys(next)) delete next[k];
        Object.assign(next, clone(old));
        if (status === undefined) delete next["status"];
        else next["status"] = status;
        if (keepManaged !== undefined) metaOf(next)["managedFields"] = keepManaged;
        else delete metaOf(next)["managedFields"];
      } else if (hasStatus && how.subresource !== "binding") {
        // (a binding writes spec.nodeName and the PodScheduled condition at once, as upstream's BindingREST)
        if (old["status"] === undefined) delete next["status"];
        else next["status"] = clone(old["status"]);
      }
    } else {
      for (const k of SYSTEM_META) delete meta[k];
      if (hasStatus && rt.storageKey !== "/namespaces") delete next["status"];
      meta["uid"] = randomUUID();
      meta["creationTimestamp"] = timeNow();
      if (rt.generation) meta["generation"] = 1;
    }
    const nmeta = metaOf(next);
    // ObjectMeta's maps and lists are omitempty: a patch or apply that removes the last label leaves no `labels: {}`.
    for (const k of ["labels", "annotations", "finalizers", "ownerReferences"]) {
      const v = nmeta[k];
      if (
        v === null ||
        (Array.isArray(v) && v.length === 0) ||
        (typeof v === "object" && v !== null && Object.keys(v).length === 0)
      )
        delete nmeta[k];
    }

    validateMeta(rt, next, old);
    pruneUnknown(rt, next, opts.fieldValidation, warnings);
    if (rt.prepare) rt.prepare(next, { operation: old ? "update" : "create", old });
    const isCrd = rt.storageKey === "apiextensions.k8s.io/customresourcedefinitions";
    if (isCrd) {
      defaultCrd(next);
      validateCrd(next, old);
      if (!old)
        nmeta["finalizers"] = [
          ...new Set([...(Array.isArray(nmeta["finalizers"]) ? (nmeta["finalizers"] as string[]) : []), CRD_FINALIZER]),
        ];
      const status = next["status"];
      next["status"] = crdStatus(
        next,
        old,
        how.subresource === "status" && isObj(status) ? { storedVersions: status["storedVersions"] } : undefined,
      );
    }
    if (rt.schema) {
      let defaulted = rt.schema.applyDefaults(next);
      const errors = rt.schema.validate(defaulted, old);
      if (errors.length > 0)
        throw invalid(
          rt.kind,
          rt.group,
          name,
          errors.map((e) => ({ type: e.type, field: e.field, message: errorBody(e) })),
        );
      defaulted = { ...defaulted };
      for (const k of Object.keys(next)) delete next[k];
      Object.assign(next, defaulted);
    }

    if (old && rt.generation) {
      const strip = (o: Obj) => {
        const c: Obj = { ...o };
        delete c["metadata"];
        if (hasStatus) delete c["status"];
        return c;
      };
      if (!jsonEqual(strip(next), strip(old))) metaOf(next)["generation"] = Number(metaOf(old)["generation"] ?? 0) + 1;
    }

    if (old && metaOf(old)["deletionTimestamp"]) {
      const before = new Set(finalizersOf(old));
      const added = finalizersOf(next).filter((f) => !before.has(f));
      if (added.length > 0) {
        throw invalid(rt.kind, rt.group, name, [
          {
            type: "FieldValueForbidden",
            field: "metadata.finalizers",
            message: `Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{${added.map((f) => JSON.stringify(f)).join(", ")}}`,
          },
        ]);
      }
    }

    let result: Obj = next;
    if (how.managed === "update") {
      const manager = opts.fieldManager ?? defaultManager(opts.userAgent);
      const args = {
        old,
        updated: next,
        manager,
        operation: "Update" as const,
        now: timeNow(),
        ...(how.subresource === "status" ? { subresource: "status" as const } : {}),
        ...listTypesOf(rt),
      };
      result = this.patchLib(() => recordUpdate(args));
    }

    // validating admission: after defaulting and validation, before the store (and for no-op writes and dry runs too)
    if (!how.admitted) {
      warnings.push(
        ...this.admit(opts, () => {
          const operation = old ? "UPDATE" : "CREATE";
          const options: Obj = {
            kind: `${old ? "Update" : "Create"}Options`,
            apiVersion: "meta.k8s.io/v1",
            ...(opts.dryRun ? { dryRun: ["All"] } : {}),
            ...(opts.fieldManager ? { fieldManager: opts.fieldManager } : {}),
          };
          return {
            operation,
            rt,
            subresource: how.subresource,
            namespace: rt.namespaced ? String(metaOf(result)["namespace"] ?? "") : "",
            name,
            object: result,
            oldObject: old,
            options,
          };
        }),
      );
    }

    const storedNext = this.toStorage(rt, result);
    metaOf(storedNext)["resourceVersion"] = stored ? metaOf(stored)["resourceVersion"] : undefined;
    // no-op: identical to what is stored, or to the stored object as read at this version; not when the object is
    // stored in another version than the one it is now written in (a storage migration's rewrite), whose stored
    // bytes differ on a real server too
    const restored = rt.toStorage !== undefined && stored?.["apiVersion"] !== storedNext["apiVersion"];
    if (
      stored &&
      (sameIgnoringManaged(storedNext, stored) ||
        (old !== undefined && !restored && sameIgnoringManaged(storedNext, this.toStorage(rt, clone(old)))))
    ) {
      return { code: 200, body: this.render(rt, stored), warnings };
    }
    delete metaOf(storedNext)["resourceVersion"];
    if (opts.dryRun) {
      const preview = this.render(rt, storedNext);
      if (stored) metaOf(preview)["resourceVersion"] = metaOf(stored)["resourceVersion"];
      return { code: stored ? 200 : 201, body: preview, warnings };
    }
    if (
      stored &&
      metaOf(storedNext)["deletionTimestamp"] &&
      finalizersOf(storedNext).length === 0 &&
      rt.storageKey !== "/namespaces"
    ) {
      const removed = this.store.remove(
        rt.storageKey,
        this.namespaceOf(rt, str(metaOf(storedNext)["namespace"])),
        name,
      );
      this.afterWrite(rt, storedNext, true);
      return {
        code: 200,
        body: this.render(rt, {
          ...storedNext,
          metadata: { ...metaOf(storedNext), resourceVersion: metaOf(removed ?? storedNext)["resourceVersion"] },
        }),
        warnings,
      };
    }
    const written = this.store.write(rt.storageKey, storedNext);
    this.afterWrite(rt, written, false);
    return { code: stored ? 200 : 201, body: this.render(rt, written), warnings };
  }

  private afterWrite(rt: ResourceType, obj: Obj, removed: boolean): void {
    if (rt.storageKey === "apiextensions.k8s.io/customresourcedefinitions") {
      const name = String(metaOf(obj)["name"]);
      if (removed) this.registry.removeCrd(name);
      else this.registry.setCrd(name, crdResourceTypes(obj, this.webhooks));
    }
    this.changed();
  }

  /** Registers resource types of every stored CRD (at startup). */
  loadCrds(): void {
    for (const crd of this.store.list("apiextensions.k8s.io/customresourcedefinitions")) {
      this.registry.setCrd(String(metaOf(crd)["name"]), crdResourceTypes(crd, this.webhooks));
    }
  }

  // ---------------------------------------------------------------- delete

  delete(rt: ResourceType, ns: string | undefined, name: string, opts: DeleteOptions): WriteResult {
    const namespace = this.namespaceOf(rt, ns);
    const stored = this.store.get(rt.storageKey, namespace, name);
    if (!stored) throw notFound(rt, name);
    const meta = metaOf(stored);
    const pre = opts.preconditions;
    if (pre?.uid && pre.uid !== meta["uid"])
      throw conflict(
        rt,
        name,
        `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${String(meta["uid"])}`,
      );
    if (pre?.resourceVersion && pre.resourceVersion !== meta["resourceVersion"])
      throw conflict(
        rt,
        name,
        `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in meta: ${String(meta["resourceVersion"])}`,
      );
    let policy = opts.propagationPolicy;
    if (policy !== undefined && !["Background", "Foreground", "Orphan"].includes(policy)) {
      throw invalid("DeleteOptions", "meta.k8s.io", "", [
        {
          type: "FieldValueNotSupported",
          field: "propagationPolicy",
          message: `Unsupported value: "${policy}": supported values: "Foreground", "Background", "Orphan", "nil"`,
        },
      ]);
    }
    if (policy === undefined && opts.orphanDependents !== undefined)
      policy = opts.orphanDependents ? "Orphan" : "Background";
    // validating admission of DELETE: oldObject is the object as it is, object is null (every delete, dry runs too)
    const options: Obj = {
      kind: "DeleteOptions",
      apiVersion: "meta.k8s.io/v1",
      ...(policy ? { propagationPolicy: policy } : {}),
      ...(opts.dryRun ? { dryRun: ["All"] } : {}),
    };
    const warnings = this.admit(opts, () => ({
      operation: "DELETE",
      rt,
      subresource: undefined,
      namespace,
      name,
      object: undefined,
      oldObject: this.render(rt, stored),
      options,
    }));

    if (rt.storageKey === "/namespaces") {
      if (meta["deletionTimestamp"]) return { code: 200, body: this.render(rt, stored), warnings };
      if (["default", "kube-system", "kube-public"].includes(name))
        throw forbidden(rt, name, "this namespace may not be deleted");
      const next = clone(stored);
      metaOf(next)["deletionTimestamp"] = timeNow();
      next["status"] = { phase: "Terminating" };
      if (opts.dryRun) return { code: 200, body: this.render(rt, next), warnings };
      const written = this.store.write(rt.storageKey, next);
      this.changed();
      return { code: 200, body: this.render(rt, written), warnings };
    }

    const finalizers = finalizersOf(stored);
    const wanted = [...finalizers];
    if (policy === "Orphan" && !wanted.includes("orphan")) wanted.push("orphan");
    if (policy === "Foreground" && !wanted.includes("foregroundDeletion")) wanted.push("foregroundDeletion");
    if (policy === "Background" || policy === "Foreground") {
      const i = wanted.indexOf("orphan");
      if (i >= 0 && !finalizers.includes("orphan")) wanted.splice(i, 1);
    }
    if (wanted.length > 0) {
      if (meta["deletionTimestamp"] && jsonEqual(wanted, finalizers)) {
        return { code: 200, body: this.render(rt, stored), warnings };
      }
      const next = clone(stored);
      const nmeta = metaOf(next);
      nmeta["finalizers"] = wanted;
      if (!nmeta["deletionTimestamp"]) {
        nmeta["deletionTimestamp"] = timeNow();
        nmeta["deletionGracePeriodSeconds"] = 0;
        if (nmeta["generation"] !== undefined) nmeta["generation"] = Number(nmeta["generation"]) + 1;
      }
      if (rt.storageKey === "apiextensions.k8s.io/customresourcedefinitions") next["status"] = crdStatus(next, stored);
      if (opts.dryRun) return { code: 200, body: this.render(rt, next), warnings };
      const written = this.store.write(rt.storageKey, next);
      this.afterWrite(rt, written, false);
      return { code: 200, body: this.render(rt, written), warnings };
    }
    if (opts.dryRun) return { code: 200, body: this.deletedBody(rt, stored), warnings };
    const removed = this.store.remove(rt.storageKey, namespace, name) as Obj;
    this.afterWrite(rt, removed, true);
    return { code: 200, body: this.deletedBody(rt, removed), warnings };
  }

  private deletedBody(rt: ResourceType, obj: Obj): Obj {
    if (rt.deleteReturnsObject) return this.render(rt, obj);
    const meta = metaOf(obj);
    const details: Obj = { name: meta["name"] };
    if (rt.group) details["group"] = rt.group;
    details["kind"] = rt.plural;
    details["uid"] = meta["uid"];
    return { kind: "Status", apiVersion: "v1", metadata: {}, status: "Success", details };
  }

  /**
   * Deletion started by a controller: background, no preconditions. With `user` (the namespace controller, the
   * garbage collector: they call the API) policies apply and a denial leaves the object; without (CRD cleanup,
   * which deletes from storage) they do not. Returns whether the object is gone or going.
   */
  deleteInternal(rt: ResourceType, ns: string, name: string, policy = "Background", user?: UserInfo): boolean {
    try {
      this.delete(rt, ns, name, { propagationPolicy: policy, dryRun: false, ...(user ? { user } : {}) });
    } catch (err) {
      if (err instanceof AdmissionDenied) return false;
      if (!(err instanceof ApiError && err.code === 404)) throw err;
    }
    return true;
  }

  /** Writes a stored object as a controller would (finalizer removal, ownerReference stripping). */
  writeInternal(rt: ResourceType, stored: Obj): void {
    const cur = this.store.get(
      rt.storageKey,
      String(metaOf(stored)["namespace"] ?? ""),
      String(metaOf(stored)["name"]),
    );
    if (!cur) return;
    if (metaOf(stored)["deletionTimestamp"] && finalizersOf(stored).length === 0) {
      if (rt.storageKey === "/namespaces") {
        const spec = stored["spec"];
        if (isObj(spec) && Array.isArray(spec["finalizers"]) && spec["finalizers"].length > 0) {
          this.afterWrite(rt, this.store.write(rt.storageKey, stored), false);
          return;
        }
      }
      const removed = this.store.remove(
        rt.storageKey,
        String(metaOf(stored)["namespace"] ?? ""),
        String(metaOf(stored)["name"]),
      );
      if (removed) this.afterWrite(rt, removed, true);
      return;
    }
    if (sameIgnoringManaged(stored, cur)) return;
    this.afterWrite(rt, this.store.write(rt.storageKey, stored), false);
  }
}

/** CRD list types (x-kubernetes-list-type) for field management; built-ins their own table, else the library's. */
function listTypesOf(rt: ResourceType): { listTypes?: ListTypes } {
  const schema = rt.schema;
  if (schema) return { listTypes: (path: string[]) => schema.listTypes(path) };
  return rt.listTypes ? { listTypes: rt.listTypes } : {};
}

export function finalizersOf(o: Obj): string[] {
  const f = metaOf(o)["finalizers"];
  return Array.isArray(f) ? (f as string[]) : [];
}

/** Index of the first entry whose key sorts after `key` (entries sorted by key). */
function firstAfter(entries: Array<[string, Obj]>, key: string): number {
  let lo = 0;
  let hi = entries.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((entries[mid] as [string, Obj])[0] <= key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function keyOf(o: Obj): string {
  const m = metaOf(o);
  return `${String(m["namespace"] ?? "")}/${String(m["name"])}`;
}

function sameIgnoringManaged(a: Obj, b: Obj): boolean {
  const strip = (o: Obj) => ({
    ...o,
    metadata: { ...metaOf(o), managedFields: undefined, resourceVersion: undefined },
  });
  return jsonEqual(strip(a), strip(b));
}

function defaultManager(userAgent: string): string {
  const prefix = userAgent.split("/")[0] ?? "";
  return prefix.slice(0, 128) || "unknown";
}

function randomName(): string {
  const alphabet = "bcdfghjklmnpqrstvwxz2456789";
  const bytes = randomBytes(5);
  return [...bytes].map((b) => alphabet[b % alphabet.length]).join("");
}

function notFoundPath(): ApiError {
  return new ApiError(404, "NotFound", "the server could not find the requested resource");
}
