import type { WorkloadContext } from "./workload-context.ts";

export function syncJob(_ctx: WorkloadContext, _ns: string, _name: string): void {}
