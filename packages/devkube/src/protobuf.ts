import { badRequest } from "./errors.ts";
import type { Obj } from "./types.ts";

// kubectl's imperative generators (`create configmap|secret|namespace|serviceaccount|role|
// rolebinding|clusterrole|clusterrolebinding|token|deployment|service|poddisruptionbudget`, `expose`,
// `auth can-i`) send
// Kubernetes protobuf. This decodes exactly those kinds: the `k8s\0` envelope, runtime.Unknown,
// ObjectMeta's common fields and each kind's own fields (field numbers from k8s.io/api generated.proto).

export const PROTOBUF_TYPE = "application/vnd.kubernetes.protobuf";
const MAGIC = Buffer.from([0x6b, 0x38, 0x73, 0x00]);

type Field = { no: number; wire: number; value: bigint | Buffer };

function readVarint(buf: Buffer, pos: number): [bigint, number] {
  let result = 0n;
  let shift = 0n;
  for (;;) {
    if (pos >= buf.length) throw new Error("truncated varint");
    const b = buf[pos++] as number;
    result |= BigInt(b & 0x7f) << shift;
    if ((b & 0x80) === 0) return [result, pos];
    shift += 7n;
  }
}

function fields(buf: Buffer): Field[] {
  const out: Field[] = [];
  let pos = 0;
  while (pos < buf.length) {
    const [key, p1] = readVarint(buf, pos);
    pos = p1;
    const no = Number(key >> 3n);
    const wire = Number(key & 7n);
    if (wire === 0) {
      const [v, p2] = readVarint(buf, pos);
      pos = p2;
      out.push({ no, wire, value: v });
    } else if (wire === 2) {
      const [len, p2] = readVarint(buf, pos);
      const end = p2 + Number(len);
      if (end > buf.length) throw new Error("truncated field");
      out.push({ no, wire, value: buf.subarray(p2, end) });
      pos = end;
    } else if (wire === 1) {
      out.push({ no, wire, value: buf.subarray(pos, pos + 8) });
      pos += 8;
    } else if (wire === 5) {
      out.push({ no, wire, value: buf.subarray(pos, pos + 4) });
      pos += 4;
    } else {
      throw new Error(`unsupported wire type ${wire}`);
    }
  }
  return out;
}

const text = (f: Field) => (f.value as Buffer).toString("utf8");
const bytes = (f: Field) => f.value as Buffer;

function mapEntry(f: Field, valueAsBase64: boolean): [string, string] {
  let k = "";
  let v = "";
  for (const e of fields(bytes(f))) {
    if (e.no === 1) k = text(e);
    if (e.no === 2) v = valueAsBase64 ? bytes(e).toString("base64") : text(e);
  }
  return [k, v];
}

function objectMeta(buf: Buffer): Obj {
  const meta: Obj = {};
  const labels: Obj = {};
  const annotations: Obj = {};
  const finalizers: string[] = [];
  for (const f of fields(buf)) {
    switch (f.no) {
      // empty strings are Go's zero values, not fields the client set
      case 1:
        if (text(f) !== "") meta["name"] = text(f);
        break;
      case 2:
        if (text(f) !== "") meta["generateName"] = text(f);
        break;
      case 3:
        if (text(f) !== "") meta["namespace"] = text(f);
        break;
      case 11: {
        const [k, v] = mapEntry(f, false);
        labels[k] = v;
        break;
      }
      case 12: {
        const [k, v] = mapEntry(f, false);
        annotations[k] = v;
        break;
      }
      case 14:
        finalizers.push(text(f));
        break;
      default:
        break;
    }
  }
  if (Object.keys(labels).length > 0) meta["labels"] = labels;
  if (Object.keys(annotations).length > 0) meta["annotations"] = annotations;
  if (finalizers.length > 0) meta["finalizers"] = finalizers;
  return meta;
}

function repeatedStrings(buf: Buffer, spec: Record<number, string>): Obj {
  const out: Obj = {};
  for (const f of fields(buf)) {
    const key = spec[f.no];
    if (key) ((out[key] ??= []) as string[]).push(text(f));
  }
  return out;
}

function scalars(buf: Buffer, spec: Record<number, string>): Obj {
  const out: Obj = {};
  for (const f of fields(buf)) {
    const key = spec[f.no];
    if (!key) continue;
    out[key] = f.wire === 0 ? Number(f.value as bigint) : text(f);
  }
  return out;
}

const POLICY_RULE = { 1: "verbs", 2: "apiGroups", 3: "resources", 4: "resourceNames", 5: "nonResourceURLs" };
const SUBJECT = { 1: "kind", 2: "apiGroup", 3: "name", 4: "namespace" };
const ROLE_REF = { 1: "apiGroup", 2: "kind", 3: "name" };
const RESOURCE_ATTRIBUTES = {
  1: "namespace",
  2: "verb",
  3: "group",
  4: "version",
  5: "resource",
  6: "subresource",
  7: "name",
};

/** Go's protobuf writes every non-pointer scalar, even empty: drop those its JSON would omit (omitempty). */
function compact(obj: Obj): Obj {
  for (const [k, v] of Object.entries(obj)) if (v === "" || v === 0) delete obj[k];
  return obj;
}

const intOrString = (buf: Buffer): number | string => {
  let type = 0;
  let int = 0;
  let str = "";
  for (const f of fields(buf)) {
    if (f.no === 1) type = Number(f.value as bigint);
    if (f.no === 2) int = Number(f.value as bigint);
    if (f.no === 3) str = text(f);
  }
  return type === 1 ? str : int;
};

function labelSelector(buf: Buffer): Obj {
  const matchLabels: Obj = {};
  for (const f of fields(buf))
    if (f.no === 1) {
      const [k, v] = mapEntry(f, false);
      matchLabels[k] = v;
    }
  return Object.keys(matchLabels).length > 0 ? { matchLabels } : {};
}

// The fields `kubectl create deployment` sets: containers with name, image, command and ports.
function container(buf: Buffer): Obj {
  const c: Obj = {};
  for (const f of fields(buf)) {
    if (f.no === 1) c["name"] = text(f);
    else if (f.no === 2) c["image"] = text(f);
    else if (f.no === 3) ((c["command"] ??= []) as string[]).push(text(f));
    else if (f.no === 4) ((c["args"] ??= []) as string[]).push(text(f));
    else if (f.no === 6)
      ((c["ports"] ??= []) as Obj[]).push(
        compact(scalars(bytes(f), { 1: "name", 2: "hostPort", 3: "containerPort", 4: "protocol", 5: "hostIP" })),
      );
    else if (f.no === 8) c["resources"] = {};
  }
  return compact(c);
}

function podTemplate(buf: Buffer): Obj {
  const t: Obj = {};
  for (const f of fields(buf)) {
    if (f.no === 1) t["metadata"] = objectMeta(bytes(f));
    else if (f.no === 2) {
      const spec: Obj = {};
      for (const e of fields(bytes(f)))
        if (e.no === 2) ((spec["containers"] ??= []) as Obj[]).push(container(bytes(e)));
      t["spec"] = spec;
    }
  }
  return t;
}

function deploymentSpec(buf: Buffer): Obj {
  const spec: Obj = {};
  for (const f of fields(buf)) {
    if (f.no === 1) spec["replicas"] = Number(f.value as bigint);
    else if (f.no === 2) spec["selector"] = labelSelector(bytes(f));
    else if (f.no === 3) spec["template"] = podTemplate(bytes(f));
    else if (f.no === 4) spec["strategy"] = compact(scalars(bytes(f), { 1: "type" }));
  }
  return spec;
}

// `kubectl create service clusterip|nodeport|loadbalancer|externalname` and `kubectl expose`
function serviceSpec(buf: Buffer): Obj {
  const spec: Obj = {};
  const selector: Obj = {};
  for (const f of fields(buf)) {
    if (f.no === 1) {
      const port: Obj = {};
      for (const e of fields(bytes(f))) {
        if (e.no === 1) port["name"] = text(e);
        else if (e.no === 2) port["protocol"] = text(e);
        else if (e.no === 3) port["port"] = Number(e.value as bigint);
        else if (e.no === 4) port["targetPort"] = intOrString(bytes(e));
        else if (e.no === 5) port["nodePort"] = Number(e.value as bigint);
        else if (e.no === 6) port["appProtocol"] = text(e);
      }
      ((spec["ports"] ??= []) as Obj[]).push(compact(port));
    } else if (f.no === 2) {
      const [k, v] = mapEntry(f, false);
      selector[k] = v;
    } else if (f.no === 3) spec["clusterIP"] = text(f);
    else if (f.no === 4) spec["type"] = text(f);
    else if (f.no === 5) ((spec["externalIPs"] ??= []) as string[]).push(text(f));
    else if (f.no === 7) spec["sessionAffinity"] = text(f);
    else if (f.no === 8) spec["loadBalancerIP"] = text(f);
    else if (f.no === 10) spec["externalName"] = text(f);
  }
  compact(spec);
  if (Object.keys(selector).length > 0) spec["selector"] = selector;
  return spec;
}

// `kubectl create poddisruptionbudget`
function pdbSpec(buf: Buffer): Obj {
  const spec: Obj = {};
  for (const f of fields(buf)) {
    if (f.no === 1) spec["minAvailable"] = intOrString(bytes(f));
    else if (f.no === 2) spec["selector"] = labelSelector(bytes(f));
    else if (f.no === 3) spec["maxUnavailable"] = intOrString(bytes(f));
  }
  return spec;
}

/** meta/v1 DeleteOptions (helm's Secret storage deletes releases with a protobuf body). */
function deleteOptions(raw: Buffer): Obj {
  const obj: Obj = {};
  const dryRun: string[] = [];
  for (const f of fields(raw)) {
    if (f.no === 1) obj["gracePeriodSeconds"] = Number(BigInt.asIntN(64, f.value as bigint));
    else if (f.no === 2) obj["preconditions"] = compact(scalars(bytes(f), { 1: "uid", 2: "resourceVersion" }));
    else if (f.no === 3) obj["orphanDependents"] = (f.value as bigint) !== 0n;
    else if (f.no === 4) obj["propagationPolicy"] = text(f);
    else if (f.no === 5) dryRun.push(text(f));
  }
  if (dryRun.length > 0) obj["dryRun"] = dryRun;
  return obj;
}

function decodeKind(kind: string, raw: Buffer): Obj {
  if (kind === "DeleteOptions") return deleteOptions(raw);
  const obj: Obj = {};
  const maps: Record<string, Obj> = {};
  const put = (field: string, [k, v]: [string, string]) => {
    (maps[field] ??= {})[k] = v;
  };
  for (const f of fields(raw)) {
    if (f.no === 1) {
      obj["metadata"] = objectMeta(bytes(f));
      continue;
    }
    switch (kind) {
      case "ConfigMap":
        if (f.no === 2) put("data", mapEntry(f, false));
        else if (f.no === 3) put("binaryData", mapEntry(f, true));
        else if (f.no === 4) obj["immutable"] = f.value === 1n;
        break;
      case "Secret":
        if (f.no === 2) put("data", mapEntry(f, true));
        else if (f.no === 3) obj["type"] = text(f);
        else if (f.no === 4) put("stringData", mapEntry(f, false));
        else if (f.no === 5) obj["immutable"] = f.value === 1n;
        break;
      case "ServiceAccount":
        if (f.no === 3) {
          const ref: Obj = {};
          for (const e of fields(bytes(f))) if (e.no === 1) ref["name"] = text(e);
          ((obj["imagePullSecrets"] ??= []) as Obj[]).push(ref);
        } else if (f.no === 4) obj["automountServiceAccountToken"] = f.value === 1n;
        break;
      case "Role":
      case "ClusterRole":
        if (f.no === 2) ((obj["rules"] ??= []) as Obj[]).push(repeatedStrings(bytes(f), POLICY_RULE));
        break;
      case "RoleBinding":
      case "ClusterRoleBinding":
        if (f.no === 2) ((obj["subjects"] ??= []) as Obj[]).push(scalars(bytes(f), SUBJECT));
        else if (f.no === 3) obj["roleRef"] = scalars(bytes(f), ROLE_REF);
        break;
      case "TokenRequest":
        if (f.no === 2) {
          const spec: Obj = {};
          for (const e of fields(bytes(f))) {
            if (e.no === 1) ((spec["audiences"] ??= []) as string[]).push(text(e));
            if (e.no === 4) spec["expirationSeconds"] = Number(e.value as bigint);
          }
          obj["spec"] = spec;
        }
        break;
      case "SelfSubjectRulesReview":
        if (f.no === 2) obj["spec"] = scalars(bytes(f), { 1: "namespace" });
        break;
      case "SelfSubjectAccessReview":
        if (f.no === 2) {
          const spec: Obj = {};
          for (const e of fields(bytes(f))) {
            if (e.no === 1) spec["resourceAttributes"] = scalars(bytes(e), RESOURCE_ATTRIBUTES);
            if (e.no === 2) spec["nonResourceAttributes"] = scalars(bytes(e), { 1: "path", 2: "verb" });
          }
          obj["spec"] = spec;
        }
        break;
      case "Deployment":
        if (f.no === 2) obj["spec"] = deploymentSpec(bytes(f));
        break;
      case "Service":
        if (f.no === 2) obj["spec"] = serviceSpec(bytes(f));
        break;
      case "PodDisruptionBudget":
        if (f.no === 2) obj["spec"] = pdbSpec(bytes(f));
        break;
      default:
        break; // Namespace: spec/status are set by the server
    }
  }
  Object.assign(obj, maps);
  return obj;
}

const SUPPORTED = new Set([
  "v1/ConfigMap",
  "v1/Secret",
  "v1/Namespace",
  "v1/ServiceAccount",
  "rbac.authorization.k8s.io/v1/Role",
  "rbac.authorization.k8s.io/v1/ClusterRole",
  "rbac.authorization.k8s.io/v1/RoleBinding",
  "rbac.authorization.k8s.io/v1/ClusterRoleBinding",
  "authentication.k8s.io/v1/TokenRequest",
  "authentication.k8s.io/v1/SelfSubjectReview",
  "authorization.k8s.io/v1/SelfSubjectAccessReview",
  "authorization.k8s.io/v1/SelfSubjectRulesReview",
  "apps/v1/Deployment",
  "v1/Service",
  "policy/v1/PodDisruptionBudget",
  "meta.k8s.io/v1/DeleteOptions",
  "v1/DeleteOptions",
]);

/** Decodes a protobuf request body into the JSON object it stands for. */
export function decodeProtobuf(body: Buffer): Obj {
  if (body.length < 4 || !body.subarray(0, 4).equals(MAGIC))
    throw badRequest("provided protobuf body does not start with the Kubernetes envelope");
  try {
    let apiVersion = "";
    let kind = "";
    let raw: Buffer = Buffer.alloc(0);
    for (const f of fields(body.subarray(4))) {
      if (f.no === 1) {
        for (const t of fields(bytes(f))) {
          if (t.no === 1) apiVersion = text(t);
          if (t.no === 2) kind = text(t);
        }
      } else if (f.no === 2) raw = bytes(f);
    }
    if (!SUPPORTED.has(`${apiVersion}/${kind}`)) {
      throw new Error(
        `protobuf bodies are only understood for ${[...SUPPORTED].join(", ")}, not ${apiVersion}/${kind}; send JSON instead`,
      );
    }
    return { apiVersion, kind, ...decodeKind(kind, raw) };
  } catch (err) {
    throw badRequest(`cannot decode protobuf body: ${(err as Error).message}`);
  }
}
