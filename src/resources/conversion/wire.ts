import type { ResourceType } from "../../kube/types.ts";
import type { WireCodec } from "../../kube/wire-codec.ts";
import { apiVersion, group } from "../group.ts";
import { convertObject } from "./convert.ts";
import { storageVersion } from "./versions.ts";

// The operator's code works in the kinds' schemas (v1alpha1's spellings, src/resources/*/schema.ts) and speaks the
// CRDs' storage version on the wire, converting at the client with the webhook's own function: its reads and writes
// need no conversion webhook call, do not use the deprecated version, and keep working while the webhook is down.

type Obj = Record<string, unknown>;

const wireApiVersion = `${group}/${storageVersion}`;
const converted = (type: ResourceType) => type.group === group && type.version !== storageVersion;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

export const mdsWireCodec: WireCodec = {
  onWire: (type) => (converted(type) ? { ...type, version: storageVersion } : type),
  decode(type, obj) {
    if (!converted(type) || !isObj(obj)) return obj;
    // A list's items may come without apiVersion and kind: they are in the version the list was asked in.
    const whole = { ...obj, apiVersion: obj["apiVersion"] ?? wireApiVersion, kind: obj["kind"] ?? type.kind };
    return convertObject(whole, apiVersion) as typeof obj;
  },
  encode(type, body) {
    if (!converted(type) || !isObj(body)) return body;
    // A merge patch names no apiVersion or kind: it is in the code's version, and stays without them.
    const out = convertObject(
      { ...body, apiVersion: body["apiVersion"] ?? apiVersion, kind: body["kind"] ?? type.kind },
      wireApiVersion,
    );
    if (body["apiVersion"] === undefined) delete out["apiVersion"];
    if (body["kind"] === undefined) delete out["kind"];
    return out as typeof body;
  },
};
