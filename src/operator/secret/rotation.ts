import { createHash } from "node:crypto";
import { parseDuration } from "../duration.ts";
import type { ConnectionCredentials } from "./connection-credentials.ts";
import type { ConsumerGate } from "./consumer-gate.ts";
import type { ConnectionSecretSpec, RotationStatus } from "./spec.ts";
import type { ConnectionCalls, SecretOwner, SecretTarget } from "./types.ts";
import { isoSeconds } from "../time.ts";

// Rotation with overlap (docs/design.md#rotation): a new connection is minted and published, the replaced one keeps working for the grace
// period, then it is revoked. The order makes every crash safe:
//   status.rotation.pending (the name to mint under) → mint → Secret → status (connection, retiring) … grace … revoke
// - a crash before the Secret write repeats the mint under the same name and Idempotency-Key (replayed where the
//   server replays; elsewhere the earlier mint is found by its name and revoked: nobody holds its password);
// - a crash after it finds the Secret holding a connection status does not name, with a rotation pending: the
//   rotation is finished (the old one retires), never mistaken for a lost connection and revoked at once;
// - a rotation never starts while another connection is retiring: at most one retired connection per Secret;
// - the retiring connection is revoked only while the live Secret holds another one;
// - with consumers Restart or Wait, only once nothing that may hold it is left (consumer-gate.ts): the restart
//   annotation is applied again on every step while a connection retires (idempotent), so a crash after the Secret
//   write, or after some of the workloads, restarts the rest; then, where the API can tell (our service's
//   openSessions), only once no client session of the old login is left: a poll, the one remote state of the gate.
//   Past consumerTimeout the old connection is kept until the consumers move or mds.dev/rotate-force says otherwise.

/** A new value of this annotation asks for one rotation now. */
export const rotateAnnotation = "mds.dev/rotate";
/** A new value of this annotation revokes a retiring connection now, whatever its consumers (past its grace period). */
export const rotateForceAnnotation = "mds.dev/rotate-force";
/** The suffix a rotation mints under: `-r` and the time in base 36 (at most 12 characters: any date to come). */
const rotationSuffix = /^-r[0-9a-z]{1,10}$/;
/** Without spec.connectionSecret.rotation.gracePeriod, an on-demand rotation keeps the old credentials this long. */
const defaultGracePeriodMs = 10 * 60_000;
/** Without rotation.consumerTimeout, Restart and Wait wait this long for the consumers before they say so. */
const defaultConsumerTimeoutMs = 30 * 60_000;

interface RotationPolicy {
  everyMs: number | undefined;
  gracePeriodMs: number;
  consumers: "Restart" | "Wait" | "Ignore";
  consumerTimeoutMs: number;
}

export function rotationPolicyOf(spec: ConnectionSecretSpec | undefined): RotationPolicy {
  const r = spec?.rotation;
  return {
    everyMs: r?.every === undefined ? undefined : parseDuration(r.every),
    gracePeriodMs: r?.gracePeriod === undefined ? defaultGracePeriodMs : parseDuration(r.gracePeriod),
    consumers: r?.consumers ?? "Ignore",
    consumerTimeoutMs: r?.consumerTimeout === undefined ? defaultConsumerTimeoutMs : parseDuration(r.consumerTimeout),
  };
}

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
  record(reason: string, message: string, type?: "Normal" | "Warning"): void;
  /** The Secret's consumers; undefined when this operator does not follow them (--rotation-consumers off). */
  consumers?: ConsumerGate | undefined;
  /** The shortest wait between two reads of the old login's open sessions (the operator's fast poll interval). */
  sessionsRecheckMs?: number | undefined;
}

/** When the next scheduled rotation is due: none without `every`, else kept once computed (jittered per object). */
function nextRotationTime(r: RotationStatus, everyMs: number | undefined, now: number, uid: string | undefined) {
  if (everyMs === undefined) return undefined;
  return r.nextRotationTime ?? isoSeconds(Date.parse(r.lastRotationTime ?? isoSeconds(now)) + jittered(everyMs, uid));
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
  const force = obj.metadata.annotations?.[rotateForceAnnotation];
  const follow = policy.consumers === "Ignore" ? undefined : ctx.consumers;
  let connectionId = ctx.published;
  const nameOf = (id: string) => target.connections.find((c) => c.id === id)?.name ?? "";
  const finish = (retired: string, t: string | undefined): RotationStatus => ({
    lastRotationTime: isoSeconds(now),
    ...(policy.everyMs === undefined
      ? {}
      : { nextRotationTime: isoSeconds(now + jittered(policy.everyMs, obj.metadata.uid)) }),
    ...(t === undefined ? {} : { trigger: t }),
    ...(r.forced === undefined ? {} : { forced: r.forced }),
    retiring: {
      id: retired,
      name: nameOf(retired),
      revokeAt: isoSeconds(now + policy.gracePeriodMs),
      ...(follow === undefined ? {} : { consumersDeadline: isoSeconds(now + policy.consumerTimeoutMs) }),
    },
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
    unfollowed(ctx);
    ctx.record(
      "SecretRotated",
      `Published new credentials (connection "${ctx.published}"); connection "${replaced}" keeps working until ${r.retiring?.revokeAt}`,
    );
  }
  let waiting: Waiting = undefined;
  if (r.retiring !== undefined && now >= Date.parse(r.retiring.revokeAt))
    ({ r, waiting } = await retireUnlessUsed(ctx, follow, r, force));
  // A force with nothing to force is taken as seen: it must not cut the next rotation's wait short.
  if (r.retiring === undefined && force !== undefined) r.forced = force;
  r.nextRotationTime = nextRotationTime(r, policy.everyMs, now, obj.metadata.uid);

  const requested = trigger !== undefined && trigger !== r.trigger;
  const scheduled = r.nextRotationTime !== undefined && now >= Date.parse(r.nextRotationTime);
  // A rotation asked for while another connection is still retiring waits for it: one retired connection at most.
  if ((r.pending !== undefined || requested || scheduled) && r.retiring === undefined) {
    const pending = r.pending ?? {
      suffix: `-r${now.toString(36)}`,
      since: isoSeconds(now),
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
    unfollowed(ctx);
    ctx.record(
      "SecretRotated",
      `Published new credentials (connection "${connectionId}"); connection "${ctx.published}" keeps working until ${r.retiring?.revokeAt}`,
    );
  }
  if (r.retiring !== undefined && follow !== undefined && policy.consumers === "Restart")
    await restartConsumers(ctx, follow, r.retiring.id);
  const empty = Object.values(r).every((v) => v === undefined);
  return {
    connectionId,
    rotation: empty ? undefined : r,
    wakeInMs: wakeOf(r, waiting, now, ctx.sessionsRecheckMs ?? 1_000),
  };
}

/** What a retiring connection past its grace period waits for: its consumers (events), or its sessions (a poll). */
type Waiting = "consumers" | "sessions" | undefined;

/**
 * When to look again: the grace period's end, the next rotation. While consumers hold the old credentials the grace
 * period's end is no wake-up (it passed): their events are (index.ts), and the deadline. Open sessions send no
 * event: they are read again after a tenth of the time waited since the grace period ended (at least `recheckMs`),
 * so the login goes at most about 10 % later than its last session, and a session held for hours costs a few dozen
 * reads, not one a second.
 */
function wakeOf(r: RotationStatus, waiting: Waiting, now: number, recheckMs: number): number | undefined {
  const deadline = r.retiring?.consumersDeadline;
  const wakes = [
    waiting ? (deadline !== undefined && Date.parse(deadline) > now ? deadline : undefined) : r.retiring?.revokeAt,
    r.nextRotationTime,
  ]
    .filter((t): t is string => t !== undefined)
    .map((t) => Math.max(0, Date.parse(t) - now));
  if (waiting === "sessions")
    wakes.push(Math.max(recheckMs, Math.round((now - Date.parse(r.retiring?.revokeAt ?? "")) / 10) || 0));
  return wakes.length === 0 ? undefined : Math.min(...wakes);
}

/** Restart or Wait asked for, and this operator cannot see the consumers: said once per rotation, as a Warning. */
function unfollowed<T extends SecretOwner>(ctx: RotationContext<T>) {
  if (ctx.policy.consumers !== "Ignore" && ctx.consumers === undefined)
    ctx.record(
      "ConsumersNotFollowed",
      `rotation.consumers is ${ctx.policy.consumers} but this operator does not follow consumers (its --rotation-consumers is off): the replaced credentials are revoked after gracePeriod, as with Ignore`,
      "Warning",
    );
}

/**
 * The retiring connection's grace period is over: revoke it unless something may still use it (or a new value of
 * mds.dev/rotate-force says to anyway); else record what it waits for.
 */
async function retireUnlessUsed<T extends SecretOwner>(
  ctx: RotationContext<T>,
  follow: ConsumerGate | undefined,
  rotation: RotationStatus,
  force: string | undefined,
): Promise<{ r: RotationStatus; waiting: Waiting }> {
  // A rotation that began under Ignore and is followed now (the spec changed) gets its deadline from its own time.
  const written = Date.parse(rotation.lastRotationTime ?? "");
  const retiring = {
    ...rotation.retiring!,
    ...(follow === undefined || rotation.retiring?.consumersDeadline !== undefined
      ? {}
      : { consumersDeadline: isoSeconds((Number.isNaN(written) ? ctx.now : written) + ctx.policy.consumerTimeoutMs) }),
  };
  rotation = { ...rotation, retiring };
  const forced = force !== undefined && force !== rotation.forced;
  const { left, waiting } =
    follow === undefined ? { left: [], waiting: undefined } : await consumersLeft(ctx, follow, rotation, ctx.policy);
  if (left.length > 0 && !forced) return { r: { ...rotation, retiring: { ...retiring, waitingFor: left } }, waiting };
  if (left.length > 0)
    ctx.record(
      "RotationForced",
      `${rotateForceAnnotation} revokes connection "${retiring.id}" while these may still use it: ${left.join("; ")}`,
      "Warning",
    );
  await ctx.crashPoint("before-retire");
  // A failed revocation throws: `retiring` stays in status and the next reconcile tries again.
  if ((await ctx.liveConnectionId()) !== retiring.id) await ctx.retire(retiring.id);
  return { r: { ...rotation, retiring: undefined, ...(forced ? { forced: force } : {}) }, waiting: undefined };
}

/** Restart: the restart annotation on every consuming workload that lacks the Secret's current hash. */
async function restartConsumers<T extends SecretOwner>(
  ctx: RotationContext<T>,
  follow: ConsumerGate,
  retiring: string,
) {
  const restarted = await follow.restart();
  if (restarted.length === 0) return;
  ctx.record(
    "ConsumersRestarted",
    `Restarted ${restarted.join(", ")} to pick up the rotated Secret; connection "${retiring}" is revoked once they rolled`,
  );
  await ctx.crashPoint("after-rotate-restart");
}

/**
 * What may still use the retiring connection: consumers that have not moved, else its login's open sessions. Past
 * the deadline a Warning says so (the Event recorder dedupes it).
 */
async function consumersLeft<T extends SecretOwner>(
  ctx: RotationContext<T>,
  follow: ConsumerGate,
  r: RotationStatus,
  policy: RotationPolicy,
): Promise<{ left: string[]; waiting: Waiting }> {
  const written = Date.parse(r.lastRotationTime ?? "");
  let left = await follow.waitingFor(Number.isNaN(written) ? ctx.now : written, policy.consumers === "Restart");
  let waiting: Waiting = left.length > 0 ? "consumers" : undefined;
  if (left.length === 0) {
    left = await sessionsLeft(ctx, follow, r.retiring?.id);
    if (left.length > 0) waiting = "sessions";
  }
  const deadline = Date.parse(r.retiring?.consumersDeadline ?? "");
  if (left.length > 0 && !Number.isNaN(deadline) && ctx.now >= deadline)
    ctx.record(
      "ConsumersNotRolled",
      `Keeping connection "${r.retiring?.id}": its consumers did not move within consumerTimeout: ${left.join("; ")}. Fix the rollout, or set a new value of the annotation ${rotateForceAnnotation} to revoke it anyway`,
      "Warning",
    );
  return { left, waiting };
}

/**
 * The consumers moved: are clients still logged in with the old login (an app that read the Secret once and kept
 * its sessions, a pod the index does not see)? Only the API can tell, and only ours does (`openSessions`); the
 * public API cannot, and then this check is skipped. Asked only when the Secret has consumers, so a rotation without
 * any costs no call more than under Ignore, and only about an own connection: status is anyone's to write, and the
 * count of another team's login must not end up in this one's status.
 */
async function sessionsLeft<T extends SecretOwner>(
  ctx: RotationContext<T>,
  follow: ConsumerGate,
  id: string | undefined,
): Promise<string[]> {
  if (id === undefined || !follow.inUse() || !ctx.calls.owns(ctx.obj, ctx.target, id)) return [];
  const open = await ctx.calls.openSessions(ctx.obj, id);
  if (open === undefined || open === 0) return [];
  return [`${open} open session${open === 1 ? "" : "s"} of the old login`];
}
