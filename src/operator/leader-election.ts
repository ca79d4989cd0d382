import type { KubeClient } from "../kube/client.ts";
import { KubeConflictError, KubeError } from "../kube/errors.ts";
import { LeaseType, type KubeObject } from "../kube/types.ts";
import type { Logger } from "pino";

// Leader election over a coordination.k8s.io/v1 Lease, as client-go does it (15 s lease, 10 s renew deadline,
// 2 s retry), with one difference that matters for safety: isLeader() turns false the moment the renew deadline
// passes, whether or not the renew loop has noticed (a starved event loop or a hung request must not leave a
// deposed leader writing; see cilium#42920).

export interface LeaseRecord {
  holderIdentity?: string | undefined;
  leaseDurationSeconds?: number | undefined;
  acquireTime?: Date | undefined;
  renewTime?: Date | undefined;
  leaseTransitions?: number | undefined;
}

export class LeaseConflictError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "LeaseConflictError";
  }
}

/** The three Lease calls election needs; `create` and `update` throw LeaseConflictError on 409. */
export interface LeaseClient {
  readonly description: string;
  get(): Promise<{ record: LeaseRecord; resourceVersion: string } | undefined>;
  create(record: LeaseRecord): Promise<void>;
  update(record: LeaseRecord, resourceVersion: string): Promise<void>;
}

// MicroTime must carry exactly 6 fractional digits: a real apiserver rejects the 3 of Date#toISOString.
export function formatMicroTime(date: Date): string {
  return date.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}

function parseTime(value: unknown): Date | undefined {
  if (typeof value !== "string") return undefined;
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? undefined : d;
}

// Only the status code travels into our errors (KubeError messages never carry request headers either).
function leaseError(action: string, lease: string, err: unknown): Error {
  if (err instanceof KubeConflictError) return new LeaseConflictError(`cannot ${action} lease ${lease}: conflict`);
  const status = err instanceof KubeError ? err.status : undefined;
  return new Error(
    `cannot ${action} lease ${lease}: ${status === undefined ? String((err as Error)?.message ?? err) : `HTTP ${status}`}`,
  );
}

interface LeaseObject extends KubeObject {
  spec?: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
}

/** The Lease through src/kube's client: the same connection pool as every other request of the operator. */
export function createLeaseClient(kube: KubeClient, namespace: string, name: string): LeaseClient {
  const description = `${namespace}/${name}`;
  const toSpec = (r: LeaseRecord) => ({
    ...(r.holderIdentity === undefined ? {} : { holderIdentity: r.holderIdentity }),
    ...(r.leaseDurationSeconds === undefined ? {} : { leaseDurationSeconds: r.leaseDurationSeconds }),
    ...(r.acquireTime === undefined ? {} : { acquireTime: formatMicroTime(r.acquireTime) }),
    ...(r.renewTime === undefined ? {} : { renewTime: formatMicroTime(r.renewTime) }),
    ...(r.leaseTransitions === undefined ? {} : { leaseTransitions: r.leaseTransitions }),
  });
  const object = (record: LeaseRecord, resourceVersion?: string): LeaseObject => ({
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    metadata: { name, namespace, ...(resourceVersion === undefined ? {} : { resourceVersion }) },
    spec: toSpec(record),
  });
  return {
    description,
    async get() {
      let lease: LeaseObject | undefined;
      try {
        lease = await kube.get<LeaseObject>(LeaseType, namespace, name);
      } catch (err) {
        throw leaseError("read", description, err);
      }
      if (lease === undefined) return undefined;
      const spec = lease.spec ?? {};
      return {
        resourceVersion: lease.metadata.resourceVersion ?? "",
        record: {
          holderIdentity: spec.holderIdentity,
          leaseDurationSeconds: spec.leaseDurationSeconds,
          acquireTime: parseTime(spec.acquireTime),
          renewTime: parseTime(spec.renewTime),
          leaseTransitions: spec.leaseTransitions,
        },
      };
    },
    async create(record) {
      try {
        await kube.create(LeaseType, object(record));
      } catch (err) {
        throw leaseError("create", description, err);
      }
    },
    async update(record, resourceVersion) {
      try {
        await kube.replace(LeaseType, object(record, resourceVersion));
      } catch (err) {
        throw leaseError("update", description, err);
      }
    },
  };
}

interface LeaderElectorOptions {
  lease: LeaseClient;
  identity: string;
  logger: Logger;
  leaseDurationMs?: number; // 15 s
  renewDeadlineMs?: number; // 10 s
  retryPeriodMs?: number; // 2 s
  onStartedLeading?: () => void;
  onStoppedLeading?: () => void;
  now?: () => number;
}

export interface LeaderElector {
  start(): void;
  /** Stops campaigning and, when leading, releases the lease so a standby takes over at once. */
  stop(): Promise<void>;
  isLeader(): boolean;
  /** The holder last observed in the Lease (possibly this process). */
  observedLeader(): string | undefined;
}

// eslint-disable-next-line max-lines-per-function -- a factory: its closure is the elector's state machine (client-go's leaderelection); each step is short
export function createLeaderElector(options: LeaderElectorOptions): LeaderElector {
  const leaseDurationMs = options.leaseDurationMs ?? 15_000;
  const renewDeadlineMs = options.renewDeadlineMs ?? 10_000;
  const retryPeriodMs = options.retryPeriodMs ?? 2_000;
  if (!(leaseDurationMs > renewDeadlineMs && renewDeadlineMs > retryPeriodMs && retryPeriodMs > 0)) {
    throw new Error("invalid leader election timing: need leaseDuration > renewDeadline > retryPeriod > 0");
  }
  const now = options.now ?? Date.now;
  const log = options.logger.child({ component: "leader-election", lease: options.lease.description });

  let running = false;
  let leading = false;
  let lastRenewMs = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let deadlineTimer: ReturnType<typeof setTimeout> | undefined;
  let inFlight: Promise<void> | undefined;
  // Expiry is judged by our own clock from when we last saw the record change (client-go's observedTime), never
  // by comparing the holder's renewTime with our clock: clocks of two machines may disagree.
  let observed: { holder: string | undefined; renewMs: number | undefined } | undefined;
  let observedAtMs = 0;
  let lastError: string | undefined;

  const isLeader = () => running && leading && now() - lastRenewMs < renewDeadlineMs;

  function becomeFollower(why: string): void {
    if (!leading) return;
    leading = false;
    if (deadlineTimer) clearTimeout(deadlineTimer);
    log.warn({ identity: options.identity, why }, "Lost leadership");
    options.onStoppedLeading?.();
  }

  function armDeadline(): void {
    if (deadlineTimer) clearTimeout(deadlineTimer);
    deadlineTimer = setTimeout(() => {
      if (leading && now() - lastRenewMs >= renewDeadlineMs) becomeFollower("renew deadline passed");
    }, renewDeadlineMs);
  }

  async function tryAcquireOrRenew(): Promise<boolean> {
    const t = now();
    const current = await options.lease.get();
    const record: LeaseRecord = {
      holderIdentity: options.identity,
      leaseDurationSeconds: Math.ceil(leaseDurationMs / 1000),
      acquireTime: new Date(t),
      renewTime: new Date(t),
      leaseTransitions: 0,
    };
    if (current === undefined) {
      await options.lease.create(record);
      observed = { holder: options.identity, renewMs: t };
      observedAtMs = t;
      return true;
    }
    const r = current.record;
    const seen = { holder: r.holderIdentity, renewMs: r.renewTime?.getTime() };
    if (observed === undefined || observed.holder !== seen.holder || observed.renewMs !== seen.renewMs) {
      observed = seen;
      observedAtMs = t;
    }
    const heldByUs = r.holderIdentity === options.identity;
    const heldByOther = !heldByUs && r.holderIdentity !== undefined && r.holderIdentity !== "";
    const durationMs = (r.leaseDurationSeconds ?? Math.ceil(leaseDurationMs / 1000)) * 1000;
    if (heldByOther && observedAtMs + durationMs > t) return false;
    if (heldByUs) {
      record.acquireTime = r.acquireTime ?? record.acquireTime;
      record.leaseTransitions = r.leaseTransitions ?? 0;
    } else {
      record.leaseTransitions = (r.leaseTransitions ?? 0) + 1;
    }
    await options.lease.update(record, current.resourceVersion);
    observed = { holder: options.identity, renewMs: t };
    observedAtMs = t;
    return true;
  }

  async function round(): Promise<void> {
    const startedAt = now();
    try {
      const ok = await tryAcquireOrRenew();
      lastError = undefined;
      if (!running) return;
      if (ok) {
        lastRenewMs = startedAt;
        if (!leading) {
          leading = true;
          log.info({ identity: options.identity }, "Became leader");
          options.onStartedLeading?.();
        }
        armDeadline();
      } else if (leading) {
        becomeFollower(`lease taken by ${observed?.holder ?? "another holder"}`);
      }
    } catch (err) {
      // A Lease that cannot be read or written (missing namespace, RBAC) would otherwise leave every replica a
      // silent standby: say so once per distinct cause.
      const message = err instanceof Error ? err.message : String(err);
      if (message !== lastError) log.warn({ err: message }, "Cannot acquire or renew the lease");
      else log.debug({ err: message }, "Lease round failed");
      lastError = message;
      if (leading && now() - lastRenewMs >= renewDeadlineMs) becomeFollower("renew deadline passed");
    }
  }

  function schedule(): void {
    if (!running) return;
    // Candidates jitter their retries (client-go's JitterFactor 1.2) so replicas do not collide every round.
    const delay = leading ? retryPeriodMs : retryPeriodMs * (1 + Math.random() * 0.2);
    timer = setTimeout(() => {
      inFlight = round().finally(() => {
        inFlight = undefined;
        schedule();
      });
    }, delay);
  }

  return {
    start() {
      if (running) return;
      running = true;
      inFlight = round().finally(() => {
        inFlight = undefined;
        schedule();
      });
    },
    async stop() {
      running = false;
      if (timer) clearTimeout(timer);
      if (deadlineTimer) clearTimeout(deadlineTimer);
      await inFlight?.catch(() => undefined);
      const wasLeading = leading;
      if (leading) {
        leading = false;
        options.onStoppedLeading?.();
      }
      if (!wasLeading) return;
      // Release: an empty holder lets a standby acquire on its next retry instead of waiting out the lease.
      try {
        const current = await options.lease.get();
        if (current?.record.holderIdentity === options.identity) {
          const t = new Date(now());
          await options.lease.update(
            { ...current.record, holderIdentity: "", leaseDurationSeconds: 1, renewTime: t },
            current.resourceVersion,
          );
          log.info({ identity: options.identity }, "Released leadership");
        }
      } catch (err) {
        log.debug({ err: err instanceof Error ? err.message : String(err) }, "Could not release the lease");
      }
    },
    isLeader,
    observedLeader: () => observed?.holder || undefined,
  };
}
