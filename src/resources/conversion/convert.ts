import { group } from "../group.ts";
import { changesOf } from "./changes.ts";
import { servedVersions, storageVersion } from "./versions.ts";

// Converts one mds.dev object between v1alpha1 and v1beta1: what the conversion webhook does for each object of a
// ConversionReview. Only the changed enums (changes.ts) and apiVersion move; everything else, metadata included,
// is passed through as it is, as the API server requires. A value outside the field's enum (which the API server's
// validation keeps out) is left as it is: read leniently.

type Obj = { [key: string]: unknown };

export class ConversionError extends Error {}

function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function versionOf(apiVersion: unknown): string {
  const [g, v] = typeof apiVersion === "string" ? apiVersion.split("/") : [];
  if (g !== group || !servedVersions.includes(v as (typeof servedVersions)[number]))
    throw new ConversionError(
      `apiVersion ${JSON.stringify(apiVersion)} is not one of ${servedVersions.map((s) => `${group}/${s}`).join(", ")}`,
    );
  return v!;
}

/** Rewrites the value at `path` of a copy of `obj` (copying only the objects on the way) when it is in `map`. */
function renameAt(obj: Obj, path: readonly string[], map: Readonly<Record<string, string>>): Obj {
  const [head, ...rest] = path;
  const value = obj[head!];
  if (rest.length === 0) {
    if (typeof value !== "string" || !Object.hasOwn(map, value)) return obj;
    return { ...obj, [head!]: map[value] };
  }
  if (!isObj(value)) return obj;
  const next = renameAt(value, rest, map);
  return next === value ? obj : { ...obj, [head!]: next };
}

/** `obj` (a Project, Database, … of mds.dev in either version) in `desiredAPIVersion`. Does not modify `obj`. */
export function convertObject(obj: Obj, desiredAPIVersion: string): Obj {
  const from = versionOf(obj["apiVersion"]);
  const to = versionOf(desiredAPIVersion);
  if (from === to) return obj;
  const kind = obj["kind"];
  if (typeof kind !== "string") throw new ConversionError("the object has no kind");
  let out: Obj = { ...obj, apiVersion: desiredAPIVersion };
  for (const change of changesOf(kind)) {
    const map =
      to === storageVersion
        ? change.values
        : Object.fromEntries(Object.entries(change.values).map(([alpha, beta]) => [beta, alpha]));
    out = renameAt(out, change.path, map);
  }
  return out;
}
