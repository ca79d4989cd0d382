// Patch application for devkube: JSON merge patch, JSON patch, strategic merge patch and
// server-side apply with managedFields, following kube-apiserver semantics. Pure: no I/O.
export { PatchError } from "./errors.ts";
export { applyMergePatch } from "./merge-patch.ts";
export { applyJsonPatch } from "./json-patch.ts";
export { applyStrategicMergePatch } from "./strategic-merge.ts";
export { serverSideApply, recordUpdate } from "./server-side-apply.ts";
export type { ApplyResult, ServerSideApplyArgs } from "./server-side-apply.ts";
export type { ListTypes } from "./managed-fields.ts";
