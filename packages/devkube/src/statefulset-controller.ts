import type { WorkloadContext } from "./workload-context.ts";

export function syncStatefulSet(_ctx: WorkloadContext, _ns: string, _name: string): void {}
