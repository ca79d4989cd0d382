import * as patchLib from "./patch/index.ts";
import { ApiError } from "./errors.ts";
import type { Obj } from "./types.ts";

// The seam to the patch library's field management. While a build of the library lacks
// server-side apply, writes keep working without managedFields and apply answers 415.

export type ListTypes = (path: string[]) => { type: "atomic" | "set" | "map"; keys?: string[] } | undefined;
interface UpdateArgs {
  old: Obj | undefined;
  updated: Obj;
  manager: string;
  operation: "Update";
  subresource?: "status";
  now: string;
  listTypes?: ListTypes;
}
interface ApplyArgs {
  live: Obj | undefined;
  applied: Obj;
  manager: string;
  force: boolean;
  subresource?: "status";
  now: string;
  listTypes?: ListTypes;
}

const lib = patchLib as unknown as {
  recordUpdate?: (a: UpdateArgs) => Obj;
  serverSideApply?: (a: ApplyArgs) => { object: Obj };
};

export function recordUpdate(args: UpdateArgs): Obj {
  return lib.recordUpdate ? lib.recordUpdate(args) : args.updated;
}

export function serverSideApply(args: ApplyArgs): { object: Obj } {
  const apply = lib.serverSideApply;
  if (!apply)
    throw new ApiError(415, "UnsupportedMediaType", "server-side apply is not available in this devkube build");
  try {
    return apply(args);
  } catch (err) {
    // kube's lastAppliedManager: `kubectl apply --server-side` (manager "kubectl") takes over
    // fields that the client-side-apply annotation says it set, without conflicts.
    if (
      !(err instanceof patchLib.PatchError) ||
      err.status !== 409 ||
      args.manager !== "kubectl" ||
      args.force ||
      !args.live
    )
      throw err;
    const allowed = lastAppliedFields(args.live);
    const causes = err.causes ?? [];
    if (allowed.size === 0 || causes.length === 0) throw err;
    const covered = causes.every((c) =>
      [...allowed].some((f) => c.field === f || c.field.startsWith(`${f}.`) || c.field.startsWith(`${f}[`)),
    );
    if (!covered) throw err;
    return apply({ ...args, force: true });
  }
}

const LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration";

/** Leaf field paths (".spec.size") of the client-side-apply annotation. */
function lastAppliedFields(live: Obj): Set<string> {
  const meta = live["metadata"];
  const annotations = meta && typeof meta === "object" ? (meta as Obj)["annotations"] : undefined;
  const text = annotations && typeof annotations === "object" ? (annotations as Obj)[LAST_APPLIED] : undefined;
  const out = new Set<string>();
  if (typeof text !== "string") return out;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return out;
  }
  const walk = (v: unknown, path: string): void => {
    if (v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length > 0) {
      for (const [k, child] of Object.entries(v)) walk(child, `${path}.${k}`);
    } else if (path) {
      out.add(path);
    }
  };
  walk(parsed, "");
  return out;
}
