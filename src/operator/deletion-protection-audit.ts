import type { Logger } from "pino";
import type { KubeClient } from "../kube/client.ts";
import type { KubeObject, ResourceType } from "../kube/types.ts";
import type { EventRecorder } from "./events.ts";

// spec.deletionProtection is enforced by the API server, through the ValidatingAdmissionPolicy that deploy/base
// installs, never by the operator. On a cluster without that policy (or its binding, or with a binding that only
// warns or audits) the field is stored and shown and nothing refuses a delete: silently. This audit looks for the
// policy and tells every protected resource once (a Warning Event per object, and one log line) when it is missing,
// so the user learns it before a prune deletes what they believed protected. The last check's answer is also a
// gauge (mds_operator_deletion_protection_unenforced), so an alert can say it where nobody reads Events.

const deletionProtectionPolicy = "mds-deletion-protection";

const PolicyType: ResourceType = {
  group: "admissionregistration.k8s.io",
  version: "v1",
  plural: "validatingadmissionpolicies",
  kind: "ValidatingAdmissionPolicy",
  namespaced: false,
};
const BindingType: ResourceType = {
  ...PolicyType,
  plural: "validatingadmissionpolicybindings",
  kind: "ValidatingAdmissionPolicyBinding",
};

type Enforcement = "enforced" | "missing" | "unknown";

/** Enforced when the policy exists and one binding of it denies. `unknown` when the operator may not read them. */
export async function deletionProtectionEnforcement(kube: KubeClient): Promise<{ state: Enforcement; detail: string }> {
  try {
    const policy = await kube.get(PolicyType, undefined, deletionProtectionPolicy);
    if (policy === undefined)
      return { state: "missing", detail: `no ValidatingAdmissionPolicy "${deletionProtectionPolicy}" on the cluster` };
    const bindings = await kube.list<KubeObject & { spec?: { policyName?: string; validationActions?: string[] } }>(
      BindingType,
    );
    const denies = bindings.items.some(
      (b) => b.spec?.policyName === deletionProtectionPolicy && (b.spec.validationActions ?? []).includes("Deny"),
    );
    if (!denies)
      return {
        state: "missing",
        detail: `no ValidatingAdmissionPolicyBinding of "${deletionProtectionPolicy}" with validationActions Deny`,
      };
    return { state: "enforced", detail: "" };
  } catch (err) {
    // 403: no right to read them (the single-namespace install); 404: a cluster older than admissionregistration/v1.
    const status = (err as { status?: number }).status;
    if (status === 403 || status === 404)
      return { state: "unknown", detail: `cannot read ValidatingAdmissionPolicies (HTTP ${status})` };
    throw err;
  }
}

interface DeletionProtectionAudit {
  /** Checks the cluster and warns each protected object not yet warned; errors are logged, never thrown. */
  run(): Promise<void>;
  /** The last check's answer; undefined before the first (a standby never checks). */
  state(): Enforcement | undefined;
}

export function createDeletionProtectionAudit(deps: {
  kube: KubeClient;
  events: EventRecorder;
  logger: Logger;
  /** The cached objects with spec.deletionProtection (others are skipped anyway): the operator keeps them by key. */
  objects: () => KubeObject[];
}): DeletionProtectionAudit {
  const warned = new Set<string>();
  let lastState: Enforcement | undefined;
  return {
    state: () => lastState,
    async run() {
      let result: Awaited<ReturnType<typeof deletionProtectionEnforcement>>;
      try {
        result = await deletionProtectionEnforcement(deps.kube);
      } catch (err) {
        deps.logger.warn(
          { err: { message: (err as Error).message } },
          "cannot check whether deletionProtection is enforced",
        );
        return;
      }
      if (result.state !== lastState && result.state !== "enforced")
        deps.logger.warn(
          { policy: deletionProtectionPolicy },
          `spec.deletionProtection may not be enforced: ${result.detail}`,
        );
      lastState = result.state;
      // Unknown (no right to read policies, e.g. the single-namespace install) is logged, not put on every object.
      if (result.state !== "missing") return;
      const objects = deps.objects();
      // Forget objects that are gone, so the set stays as large as the cache at most.
      const present = new Set(objects.map((o) => o.metadata.uid ?? ""));
      for (const uid of warned) if (!present.has(uid)) warned.delete(uid);
      for (const obj of objects) {
        const uid = obj.metadata.uid ?? "";
        if ((obj as { spec?: { deletionProtection?: unknown } }).spec?.deletionProtection !== true || warned.has(uid))
          continue;
        warned.add(uid);
        deps.events.record(
          obj,
          "Warning",
          "DeletionProtectionNotEnforced",
          `spec.deletionProtection is true, but nothing on this cluster enforces it (${result.detail}): a delete or a prune would go through. Install deploy/base/deletion-protection.yaml (Kubernetes >= 1.30)`,
        );
      }
    },
  };
}
