import { createHash } from "node:crypto";
import { parseDuration } from "../duration.ts";
import type { ConnectionCredentials } from "./connection-credentials.ts";
import type { ConnectionSecretSpec, RotationStatus } from "./spec.ts";
import type { ConnectionCalls, SecretOwner, SecretTarget } from "./types.ts";

// Rotation with overlap (docs/design.md#rotation): a new connection is minted and published, the replaced one keeps working for the grace
// period, then it is revoked. The order makes every crash safe:
//   status.rotation.pending (the name to mint under) → mint → Secret → status (connection, retiring) … grace … revoke
// - a crash before the Secret write repeats the mint under the same name and Idempotency-Key (replayed where the
//   server replays; elsewhere the earlier mint is found by its name and revoked: nobody holds its password);
// - a crash after it finds the Secret holding a connection status does not name, with a rotation pending: the
//   rotation is finished (the old one retires), never mistaken for a lost connection and revoked at once;
// - a rotation never starts while another connection is retiring: at most one retired connection per Secret;
// - the retiring connection is revoked only while the live Secret holds another one.

/** A new value of this annotation asks for one rotation now. */
export const rotateAnnotation = "mds.dev/rotate";
/** The suffix a rotation mints under: `-r` and the time in base 36 (at most 12 characters: any date to come). */
const rotationSuffix = /^-r[0-9a-z]{1,10}$/;
/** Without spec.connectionSecret.rotation.gracePeriod, an on-demand rotation keeps the old credentials this long. */
const defaultGracePeriodMs = 10 * 60_000;

interface RotationPolicy {
  everyMs: number | undefined;
  gracePeriodMs: number;
}

export function rotationPolicyOf(spec: ConnectionSecretSpec | undefined): RotationPolicy {
  const r = spec?.rotation;
  return {
    everyMs: r?.every === undefined ? undefined : parseDuration(r.every),
    gracePeriodMs: r?.gracePeriod === undefined ? defaultGracePeriodMs : parseDuration(r.gracePeriod),
  };
}

const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z");

/**
 * Spreads a shared schedule: each object rotates up to 10 % before its interval ends, at a fraction fixed by its uid,
 * so Databases applied together do not all mint at the same second.
 */
function jittered(everyMs: number, uid: string | undefined): number {
  const f =
    createHash("sha256")
      .update(uid ?? "")
      .digest()
      .readUInt32BE(0) / 0x1_0000_0000;
  return Math.round(everyMs * (1 - 0.1 * f));
}

interface RotationContext<T extends SecretOwner> {
  obj: T & { status?: { rotation?: RotationStatus | undefined } | undefined };
  calls: ConnectionCalls<T>;
  target: SecretTarget;
  /** The connection the Secret holds now (it is current; re-read live while a rotation is pending). */
  published: string;
  policy: RotationPolicy;
  now: number;
  /** Writes the Secret with these credentials (the only copy: retried in process). */
  publish(credentials: ConnectionCredentials): Promise<void>;
  /** The connection the live Secret holds (never the cache: a revocation must not trust a lagging one). */
  liveConnectionId(): Promise<string | undefined>;
  /** Revokes a connection nobody holds; a failure is logged, not thrown. */
  revoke(id: string, why: string): Promise<void>;
  /** Revokes the retiring connection; a failure (other than gone) throws. */
  retire(id: string): Promise<void>;
  /** Writes status fields before the mint (the pending rotation must be recorded before it can have acted). */
  saveStatus(fields: Record<string, unknown>): Promise<void>;
  crashPoint(name: string): void | Promise<void>;
  record(reason: string, message: string): void;
}

/**
 * One rotation step; returns the connection the Secret holds, the rotation status and when to look again. Over 80
 * lines on purpose: it is the write order above read top to bottom (finish a crashed rotation, retire, start one),
 * and split into parts the order that makes each crash safe would no longer be visible in one place.
 */
export async function rotateStep<T extends SecretOwner>(
  ctx: RotationContext<T>,
): Promise<{ connectionId: string; rotation: RotationStatus | undefined; wakeInMs: number | undefined }> {
  const { obj, policy, now, target } = ctx;
  let r: RotationStatus = { ...(obj.status?.rotation ?? {}) };
  // The suffix names what the rotation mints: only the form the operator writes, so a status written by someone else
  // cannot make it mint (and then revoke as "lost") under another resource's connection name.
  if (r.pending !== undefined && !rotationSuffix.test(r.pending.suffix)) r.pending = undefined;
  const recorded = obj.status?.connection?.id;
  const trigger = obj.metadata.annotations?.[rotateAnnotation];
  let connectionId = ctx.published;
  const nameOf = (id: string) => target.connections.find((c) => c.id === id)?.name ?? "";
  const finish = (retired: string, t: string | undefined): RotationStatus => ({
    lastRotationTime: iso(now),
    ...(policy.everyMs === undefined
      ? {}
      : { nextRotationTime: iso(now + jittered(policy.everyMs, obj.metadata.uid)) }),
    ...(t === undefined ? {} : { trigger: t }),
    retiring: { id: retired, name: nameOf(retired), revokeAt: iso(now + policy.gracePeriodMs) },
  });

  // A crash after the rotated Secret was written and before status named it: the Secret no longer holds the
  // connection the rotation set out to replace. Finish that rotation (never mint again). Read live: a lagging
  // Secret cache would make a published rotation look unpublished and mint a second time.
  const replaced = r.pending?.replaces ?? recorded;
  if (r.pending !== undefined) connectionId = ctx.published = (await ctx.liveConnectionId()) ?? ctx.published;
  if (r.pending !== undefined && replaced !== undefined && ctx.published !== replaced) {
    // A mint of this rotation whose answer was lost (a server that does not replay made a second one) carries the
    // published connection's name: nobody holds its password. The crash may have come before it was revoked.
    const mintName = nameOf(ctx.published);
    for (const c of target.connections) {
      if (mintName !== "" && c.name === mintName && c.id !== ctx.published && c.id !== replaced)
        await ctx.revoke(c.id, "a rotation minted it and its answer was lost");
    }
    r = finish(replaced, r.pending.trigger ?? r.trigger);
    ctx.record(
      "SecretRotated",
      `Published new credentials (connection "${ctx.published}"); connection "${replaced}" keeps working until ${r.retiring?.revokeAt}`,
    );
  }
  if (r.retiring !== undefined && now >= Date.parse(r.retiring.revokeAt)) {
    await ctx.crashPoint("before-retire");
    // A failed revocation throws: `retiring` stays in status and the next reconcile tries again.
    if ((await ctx.liveConnectionId()) !== r.retiring.id) await ctx.retire(r.retiring.id);
    r = { ...r, retiring: undefined };
  }
  if (policy.everyMs === undefined) r.nextRotationTime = undefined;
  else
    r.nextRotationTime ??= iso(Date.parse(r.lastRotationTime ?? iso(now)) + jittered(policy.everyMs, obj.metadata.uid));

  const requested = trigger !== undefined && trigger !== r.trigger;
  const scheduled = r.nextRotationTime !== undefined && now >= Date.parse(r.nextRotationTime);
  // A rotation asked for while another connection is still retiring waits for it: one retired connection at most.
  if ((r.pending !== undefined || requested || scheduled) && r.retiring === undefined) {
    const pending = r.pending ?? {
      suffix: `-r${now.toString(36)}`,
      since: iso(now),
      replaces: ctx.published,
      ...(requested ? { trigger } : {}),
    };
    if (r.pending === undefined) await ctx.saveStatus({ rotation: { ...r, pending } });
    const minted = await ctx.calls.mint(obj, target, pending.suffix);
    await ctx.crashPoint("after-rotate-mint");
    await ctx.publish(minted.credentials);
    await ctx.crashPoint("after-rotate-secret");
    for (const id of minted.leaked) await ctx.revoke(id, "a rotation minted it and its answer was lost");
    r = finish(ctx.published, pending.trigger ?? r.trigger);
    connectionId = minted.credentials.connectionId;
    ctx.record(
      "SecretRotated",
      `Published new credentials (connection "${connectionId}"); connection "${ctx.published}" keeps working until ${r.retiring?.revokeAt}`,
    );
  }
  const wakes = [r.retiring?.revokeAt, r.nextRotationTime]
    .filter((t): t is string => t !== undefined)
    .map((t) => Math.max(0, Date.parse(t) - now));
  const empty = Object.values(r).every((v) => v === undefined);
  return {
    connectionId,
    rotation: empty ? undefined : r,
    wakeInMs: wakes.length === 0 ? undefined : Math.min(...wakes),
  };
}
