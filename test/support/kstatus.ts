// kstatus (sigs.k8s.io/cli-utils, pkg/kstatus/status) as Flux's health checks, kpt and Config Sync compute it,
// re-implemented for the tests: the rules that apply to a custom resource, in upstream's order. Read from
// kubernetes-sigs/cli-utils at 5895ad6 (2025-10-21):
//   - status.go  `Compute`: generic properties first; then the built-in kinds' rules (core.go `legacyTypes`, none
//                of which names a custom resource); then `checkReadyCondition`; else Current ("Resource is current").
//   - generic.go `checkGenericProperties`: metadata.deletionTimestamp set → Terminating; then `checkGeneration`:
//                status.observedGeneration present and ≠ metadata.generation → InProgress
//                (LatestGenerationNotObserved; skipped when either is absent); then the conditions *in list order*:
//                the first `Reconciling` True → InProgress, the first `Stalled` True → Failed (whichever comes first).
//   - status.go  `checkReadyCondition`: the first `Ready` condition: True → Current, False or Unknown → InProgress.
//   - util.go    `newInProgressStatus` / `newFailedStatus`: the message is the condition's message.
// Not modelled: the built-in kinds (Deployment, Pod, …) and NotFound/Unknown, which only the pollers produce.

export type KStatus = "InProgress" | "Failed" | "Current" | "Terminating";

export interface KStatusResult {
  status: KStatus;
  message: string;
  /** The condition that decided it (upstream's Result.Conditions), if any. */
  reason?: string;
}

interface Obj {
  metadata?: { generation?: number | undefined; deletionTimestamp?: string | undefined } | undefined;
  status?:
    | {
        observedGeneration?: number | undefined;
        conditions?:
          { type: string; status: string; reason?: string | undefined; message?: string | undefined }[] | undefined;
      }
    | undefined;
}

export function kstatusOf(obj: Obj): KStatusResult {
  // generic.go: deletion wins over everything.
  if (obj.metadata?.deletionTimestamp !== undefined && obj.metadata.deletionTimestamp !== "") {
    return { status: "Terminating", message: "Resource scheduled for deletion" };
  }
  // generic.go checkGeneration: only when both numbers exist.
  const generation = obj.metadata?.generation;
  const observed = obj.status?.observedGeneration;
  if (generation !== undefined && observed !== undefined && observed !== generation) {
    return {
      status: "InProgress",
      message: `generation is ${generation}, but latest observed generation is ${observed}`,
      reason: "LatestGenerationNotObserved",
    };
  }
  const conditions = obj.status?.conditions ?? [];
  // generic.go: one pass, first match of either abnormal-true condition decides.
  for (const c of conditions) {
    if (c.type === "Reconciling" && c.status === "True")
      return { status: "InProgress", message: c.message ?? "", reason: c.reason ?? "" };
    if (c.type === "Stalled" && c.status === "True")
      return { status: "Failed", message: c.message ?? "", reason: c.reason ?? "" };
  }
  // status.go checkReadyCondition: the first Ready condition with a known status decides.
  for (const c of conditions) {
    if (c.type !== "Ready") continue;
    if (c.status === "True") return { status: "Current", message: "Resource is Ready" };
    if (c.status === "False" || c.status === "Unknown")
      return { status: "InProgress", message: c.message ?? "", reason: c.reason ?? "" };
  }
  // status.go: "the absence of any known conditions means the resource is current".
  return { status: "Current", message: "Resource is current" };
}

/**
 * Whether an Argo CD health status says the same as a kstatus result: Healthy ↔ Current, Degraded ↔ Failed,
 * Progressing ↔ InProgress (Suspended too: a paused resource is InProgress to kstatus, which has no pause). Argo CD has
 * no Terminating: a resource being deleted is Progressing, or Degraded while a Stalled condition holds.
 */
export function argoAgrees(kstatus: KStatus, argo: string): boolean {
  switch (kstatus) {
    case "Current":
      return argo === "Healthy";
    case "Failed":
      return argo === "Degraded";
    case "InProgress":
      return argo === "Progressing" || argo === "Suspended";
    case "Terminating":
      return argo === "Progressing" || argo === "Degraded";
  }
}
