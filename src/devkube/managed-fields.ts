import * as patchLib from "./patch/index.ts";
import { ApiError } from "./errors.ts";
import type { Obj } from "./types.ts";

// The seam to the patch library's field management. While a build of the library lacks
// server-side apply, writes keep working without managedFields and apply answers 415.

interface UpdateArgs { old: Obj | undefined; updated: Obj; manager: string; operation: "Update"; subresource?: "status"; now: string }
interface ApplyArgs { live: Obj | undefined; applied: Obj; manager: string; force: boolean; subresource?: "status"; now: string }

const lib = patchLib as unknown as { recordUpdate?: (a: UpdateArgs) => Obj; serverSideApply?: (a: ApplyArgs) => { object: Obj } };

export function recordUpdate(args: UpdateArgs): Obj {
  return lib.recordUpdate ? lib.recordUpdate(args) : args.updated;
}

export function serverSideApply(args: ApplyArgs): { object: Obj } {
  if (!lib.serverSideApply) throw new ApiError(415, "UnsupportedMediaType", "server-side apply is not available in this devkube build");
  return lib.serverSideApply(args);
}
