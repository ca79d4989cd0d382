import { setCondition, type Condition } from "./conditions.ts";

// kstatus (sigs.k8s.io/cli-utils pkg/kstatus/status: Flux's health checks, `wait` and `dependsOn`, kpt, Config Sync)
// reads a custom resource by two abnormal-true conditions before anything else: Reconciling=True → InProgress,
// Stalled=True → Failed; only without them does it fall back to Ready (True → Current). Ready alone cannot say
// "ready, but rotating" or "failed for good", so every status write of both loops derives the pair here, from what
// the write already says (Ready, Synced, deletion, a pending rotation): one rule for every kind.
//
// Reconciling is False (not removed) once settled, like Stalled after it was True: kstatus reads both the same, the
// False condition's lastTransitionTime says when the resource last settled, and `kubectl wait
// --for=condition=Reconciling=False` works. Both are derived from data that only changes when the state does, so a
// resync that learns nothing writes nothing (no timestamp churn).

export interface ProgressInput {
  generation: number | undefined;
  deleting: boolean;
  /** status.rotation.pending: new credentials minted or about to be, not yet published. */
  rotating: boolean;
  /** The message when a retiring connection is kept past consumerTimeout (status.ts); undefined otherwise. */
  consumersNotRolled?: string | undefined;
  /** A terminal error being reported (errors.ts): stalls whatever its reason. */
  terminal?: { reason: string; message: string } | undefined;
  /** The reasons that stall (conditions.ts `loopStallingReasons` and the kind's own). */
  stalling: ReadonlySet<string>;
}

export function withProgress(conditions: Condition[] | undefined, input: ProgressInput, now: Date): Condition[] {
  const find = (type: string) => conditions?.find((c) => c.type === type);
  const ready = find("Ready");
  const synced = find("Synced");
  const stall =
    input.terminal ??
    [synced, ready].find((c) => c !== undefined && c.status === "False" && input.stalling.has(c.reason));
  const set = (
    list: Condition[] | undefined,
    type: "Reconciling" | "Stalled",
    status: "True" | "False",
    reason: string,
    message: string,
  ) => setCondition(list, { type, status, reason, message, observedGeneration: input.generation }, now);

  let next = conditions;
  if (stall !== undefined) next = set(next, "Stalled", "True", stall.reason, stall.message);
  else if (find("Stalled")?.status === "True") next = set(next, "Stalled", "False", "ReconcileSuccess", "");

  // The CRD's default status (AwaitingOperator) is a placeholder, not a transition: the first real one replaces it.
  if (find("Reconciling")?.reason === "AwaitingOperator") next = next?.filter((c) => c.type !== "Reconciling");
  const [status, reason, message] = reconciling(ready, synced, stall, input);
  return set(next, "Reconciling", status, reason, message);
}

function reconciling(
  ready: Condition | undefined,
  synced: Condition | undefined,
  stall: { reason: string } | undefined,
  input: ProgressInput,
): ["True" | "False", string, string] {
  // Never both True: kstatus takes whichever comes first in the list.
  if (stall !== undefined)
    return ["False", stall.reason, "Stopped until the user changes something: see the Stalled condition"];
  if (input.deleting)
    return ready?.status === "False"
      ? ["True", ready.reason, ready.message]
      : ["True", "Deleting", "The resource is being deleted"];
  if (synced?.reason === "ReconcilePaused") return ["False", "ReconcilePaused", synced.message];
  if (input.consumersNotRolled !== undefined) return ["True", "ConsumersNotRolled", input.consumersNotRolled];
  if (input.rotating)
    return ["True", "Rotating", "Rotating the connection Secret's credentials; the current ones keep working"];
  if (ready?.status === "True") return ["False", "Available", ""];
  // Not usable yet: what it waits for (a project, a token, the service) is in Synced, else Ready says what it does.
  if (synced?.status === "False") return ["True", synced.reason, synced.message];
  if (ready !== undefined) return ["True", ready.reason, ready.message];
  return ["True", "Progressing", "The operator has started on the resource"];
}
