import type { WorkloadContext } from "./workload-context.ts";

export function syncDaemonSet(_ctx: WorkloadContext, _ns: string, _name: string): void {}
