import {
  PatchError,
  serverSideApply as applyFields,
  type ApplyResult,
  type ServerSideApplyArgs,
} from "./patch/index.ts";
import type { Obj } from "./types.ts";

// Server-side apply as kube-apiserver runs it: the patch library's, plus kube's lastAppliedManager: `kubectl apply
// --server-side` (manager "kubectl") takes over the fields that the client-side-apply annotation says it set,
// without conflicts.
export function serverSideApply(args: ServerSideApplyArgs): ApplyResult {
  try {
    return applyFields(args);
  } catch (err) {
    if (!(err instanceof PatchError) || err.status !== 409 || args.manager !== "kubectl" || args.force || !args.live)
      throw err;
    const allowed = lastAppliedFields(args.live);
    const causes = err.causes ?? [];
    if (allowed.size === 0 || causes.length === 0) throw err;
    const covered = causes.every((c) =>
      [...allowed].some((f) => c.field === f || c.field.startsWith(`${f}.`) || c.field.startsWith(`${f}[`)),
    );
    if (!covered) throw err;
    return applyFields({ ...args, force: true });
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
