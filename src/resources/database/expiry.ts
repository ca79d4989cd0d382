import { TerminalError } from "../../operator/errors.ts";
import type { Expiry } from "../../operator/managed-handler.ts";

// A Database's expiry (spec.expireAfter, spec.expiresAt): when it is due, and what status records of it. The time is
// computed once and kept in status, so an operator restart or another replica's clock does not move it:
// - expiresAt: that very time;
// - expireAfter: counted from status.expiryCountsFrom, which is the resource's creationTimestamp (the API server's
//   clock) and moves only when spec.expiryRenewal changes (to the operator's time when it first sees the new value:
//   "3 days after the pull request's last push" is expireAfter 72h with the PR's head commit as expiryRenewal).
// The warning comes 1 hour or a tenth of the lifetime before, whichever is shorter.

interface ExpirySpec {
  expireAfter?: string | undefined;
  expiresAt?: string | undefined;
  expiryRenewal?: string | undefined;
}

interface ExpiryStatus {
  expiresAt?: string | undefined;
  expiryCountsFrom?: string | undefined;
  expiryRenewal?: string | undefined;
}

const units: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

/** A Go/Kubernetes duration ("72h", "1h30m", "90s", "500ms") in milliseconds; undefined if it is not one. */
export function parseDuration(text: string): number | undefined {
  if (!/^(\d+(\.\d+)?(ms|s|m|h))+$/.test(text)) return undefined;
  let ms = 0;
  for (const [, n, , unit] of text.matchAll(/(\d+(\.\d+)?)(ms|s|m|h)/g)) ms += Number(n) * units[unit!]!;
  return ms;
}

/** The largest time a JavaScript Date holds (about the year 275760). */
const maxDateMs = 8.64e15;
const iso = (ms: number) => new Date(ms).toISOString().replace(/\.000Z$/, "Z");

/**
 * The Database's expiry, or undefined when its spec sets none. `status` is what an earlier reconcile stored;
 * `now` is used only when a new spec.expiryRenewal restarts the countdown.
 */
export function expiryOf(
  spec: ExpirySpec,
  creationTimestamp: string | undefined,
  status: ExpiryStatus | undefined,
  now: Date,
): Expiry | undefined {
  const cleared = { expiresAt: undefined, expiryCountsFrom: undefined, expiryRenewal: undefined };
  if (spec.expiresAt === undefined && spec.expireAfter === undefined) {
    return status?.expiresAt === undefined ? undefined : { fields: cleared };
  }
  const created = Date.parse(creationTimestamp ?? "");
  const start = Number.isFinite(created) ? created : now.getTime();
  if (spec.expiresAt !== undefined) {
    const at = Date.parse(spec.expiresAt);
    return { fields: { ...cleared, expiresAt: iso(at) }, expiresAt: new Date(at), warnAt: new Date(warnAt(start, at)) };
  }
  const lifetime = parseDuration(spec.expireAfter!);
  if (lifetime === undefined)
    throw new TerminalError(
      "InvalidSpec",
      `spec.expireAfter "${spec.expireAfter}" is not a duration such as 72h or 90m`,
    );
  const stored = Date.parse(status?.expiryCountsFrom ?? "");
  const sameRenewal = (status?.expiryRenewal ?? "") === (spec.expiryRenewal ?? "");
  // The first count starts at creation; a changed renewal key restarts it now; otherwise what is stored holds.
  const from = !Number.isFinite(stored) ? start : sameRenewal ? stored : now.getTime();
  const at = from + lifetime;
  // 32 digits pass the schema's pattern; past ±8.64e15 ms a Date is invalid and every reconcile would throw.
  if (!(Math.abs(at) <= maxDateMs))
    throw new TerminalError(
      "InvalidSpec",
      `spec.expireAfter "${spec.expireAfter}" counted from ${iso(from)} is too far in the future for a date; use a shorter duration`,
    );
  return {
    fields: {
      expiresAt: iso(at),
      expiryCountsFrom: iso(from),
      expiryRenewal: spec.expiryRenewal,
    },
    expiresAt: new Date(at),
    warnAt: new Date(warnAt(from, at)),
  };
}

/** One hour before, or a tenth of the lifetime before when that is shorter. */
function warnAt(from: number, at: number): number {
  return at - Math.min(3_600_000, Math.max(0, (at - from) / 10));
}
