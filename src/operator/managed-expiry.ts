import { TerminalError } from "./errors.ts";
import type { Expiry, ManagedObject } from "./managed-handler.ts";
import type { LoopRun } from "./managed-run.ts";
import { requeueAfter, type Outcome } from "./outcome.ts";

// Expiry, for a kind whose handler reads one from the spec (a Database's expireAfter or expiresAt): the loop stores
// the time in status once (an operator restart or clock skew must not move it), warns before it, and at it deletes
// the resource, so deletionPolicy decides what happens remotely. deletionProtection keeps it: condition Expired and a
// Warning Event say so (docs/preview-environments.md).

/** Milliseconds until the expiry's next moment (its warning, then the expiry itself); undefined: none ahead. */
function msUntilExpiry(expiry: Expiry | undefined, now: Date): number | undefined {
  const next = [expiry?.warnAt, expiry?.expiresAt].find((t) => t !== undefined && t > now);
  return next === undefined ? undefined : Math.max(0, next.getTime() - now.getTime()) + 100;
}

/** Runs the rest of the reconcile so that the resource is looked at again no later than its expiry's next moment. */
export async function untilExpiry(
  expiry: Expiry | undefined,
  now: () => Date,
  reconcile: () => Promise<Outcome>,
): Promise<Outcome> {
  try {
    const outcome = await reconcile();
    const wake = msUntilExpiry(expiry, now());
    if (wake === undefined || outcome.type === "error") return outcome;
    return outcome.type === "requeueAfter" && outcome.ms <= wake ? outcome : requeueAfter(wake);
  } catch (err) {
    // A Stalled resource is not retried by itself: it must still be looked at when it expires.
    const wake = msUntilExpiry(expiry, now());
    if (err instanceof TerminalError && wake !== undefined && wake < (err.recheckMs ?? Infinity))
      throw new TerminalError(err.reason, err.message, { cause: err.cause, recheckMs: wake });
    throw err;
  }
}

/**
 * Stores the expiry's fields (run.expiryStatus, written with every status write), warns once before it, and at or
 * after it deletes the resource; a protected resource is never deleted. True when the resource was deleted.
 */
export async function expire<T extends ManagedObject>(run: LoopRun<T>, expiry: Expiry): Promise<boolean> {
  const now = run.now();
  const at = expiry.expiresAt;
  const when = String(expiry.fields["expiresAt"]);
  const policy = run.obj.spec.deletionPolicy ?? "Retain";
  const warned = run.obj.status?.["expiryWarnedFor"];
  if (at === undefined || now < at) {
    const due = at !== undefined && expiry.warnAt !== undefined && now >= expiry.warnAt && warned !== when;
    if (due) {
      const then =
        run.obj.spec.deletionProtection === true
          ? "; deletionProtection is true, so it will be kept"
          : ` and will then be deleted (deletionPolicy ${policy})`;
      run.deps.events.record(run.obj, "Warning", "Expiring", `This ${run.noun} expires at ${when}${then}`);
    }
    const expired = run.obj.status?.conditions?.some((c) => c.type === "Expired" && c.status === "True");
    const message = at === undefined ? "" : `Expires at ${when}`;
    run.expiryStatus = {
      fields: { ...expiry.fields, expiryWarnedFor: due ? when : at === undefined ? undefined : warned },
      conds: expired ? [{ type: "Expired", status: "False", reason: "NotExpired", message }] : [],
    };
    return false;
  }
  if (run.obj.spec.deletionProtection === true) {
    const message = `Expired at ${when} but kept: spec.deletionProtection is true (set it to false to let it be deleted, or remove the expiry)`;
    run.deps.events.record(run.obj, "Warning", "ExpiryBlocked", message);
    run.expiryStatus = {
      fields: { ...expiry.fields, expiryWarnedFor: warned },
      conds: [{ type: "Expired", status: "True", reason: "DeletionProtected", message }],
    };
    return false;
  }
  const message = `Expired at ${when}: deleting this ${run.noun} (deletionPolicy ${policy})`;
  run.deps.events.record(run.obj, "Normal", "Expired", message);
  run.log.info({ expiresAt: when }, `Deleting expired ${run.handler.kind}`);
  const uid = run.obj.metadata.uid;
  // Only this very object: one re-created under the same name is not deleted by mistake.
  await run.deps.kube.delete(
    run.handler.type,
    run.obj.metadata.namespace,
    run.obj.metadata.name,
    uid === undefined ? {} : { uid },
  );
  return true;
}
