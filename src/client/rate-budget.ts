import { createHash } from "node:crypto";
import type { Clock } from "./clock.ts";

export interface RateLimitOptions {
  /** Sustained rate. Default 10 requests/s. */
  requestsPerSecond?: number;
  /** Bucket size: requests allowed at once after a quiet spell. Default 20. */
  burst?: number;
}

export const defaultRateLimit: Required<RateLimitOptions> = { requestsPerSecond: 10, burst: 20 };

/**
 * A token bucket shared by every caller of one credential, plus a pause that a 429 sets for
 * all of them: the service's budget is per token, so one client pausing while another keeps
 * sending would only earn more 429s.
 *
 * It is kept as GCRA (the "virtual scheduling" form of a token bucket): each caller reserves the
 * next free slot and sleeps once until it, so callers go in arrival order and a thousand waiters
 * cost a thousand timers, not a thundering herd every refill.
 */
export class RateBudget {
  readonly requestsPerSecond: number;
  readonly burst: number;
  readonly #clock: Clock;
  readonly #interval: number;
  readonly #tolerance: number;
  /** Theoretical arrival time of the next request: the bucket is full when it is <= now. */
  #tat: number;
  #pausedUntil = 0;

  constructor(options: RateLimitOptions & { clock: Clock }) {
    const { requestsPerSecond, burst } = resolveRateLimit(options);
    this.requestsPerSecond = requestsPerSecond;
    this.burst = burst;
    this.#clock = options.clock;
    this.#interval = 1000 / requestsPerSecond;
    this.#tolerance = this.#interval * (burst - 1);
    this.#tat = options.clock.now();
  }

  /** Milliseconds since the epoch until which every caller waits (0 when never paused). */
  get pausedUntil(): number {
    return this.#pausedUntil;
  }

  /**
   * Holds every caller until `until` (ms since epoch); an earlier pause never shortens a later
   * one. Afterwards callers resume at the sustained rate, without a burst that would hit the
   * limit again at once.
   */
  pauseUntil(until: number): void {
    if (until <= this.#pausedUntil) return;
    this.#pausedUntil = until;
    this.#tat = Math.max(this.#tat, until + this.#tolerance);
  }

  /** Waits for a slot; returns how long the caller was held (ms). */
  async acquire(signal?: AbortSignal): Promise<number> {
    const started = this.#clock.now();
    for (;;) {
      signal?.throwIfAborted();
      const now = this.#clock.now();
      if (this.#pausedUntil > now) {
        await this.#clock.sleep(this.#pausedUntil - now, signal);
        continue;
      }
      const tat = Math.max(this.#tat, now);
      const allowAt = tat - this.#tolerance;
      this.#tat = tat + this.#interval;
      if (allowAt > now) await this.#clock.sleep(allowAt - now, signal);
      // Paused while this caller waited for its slot: take a new slot after the pause.
      if (this.#pausedUntil > this.#clock.now()) continue;
      return this.#clock.now() - started;
    }
  }
}

/** The settings with defaults filled in; throws a TypeError naming a bad one. */
function resolveRateLimit(options: RateLimitOptions): Required<RateLimitOptions> {
  const requestsPerSecond = options.requestsPerSecond ?? defaultRateLimit.requestsPerSecond;
  const burst = options.burst ?? defaultRateLimit.burst;
  if (!(requestsPerSecond > 0) || !Number.isFinite(requestsPerSecond)) {
    throw new TypeError(`invalid client option rateLimit.requestsPerSecond: ${String(requestsPerSecond)}`);
  }
  if (!(burst >= 1) || !Number.isFinite(burst)) {
    throw new TypeError(`invalid client option rateLimit.burst: ${String(burst)}`);
  }
  return { requestsPerSecond, burst };
}

// Budgets live for the process: one per credential identity, whatever number of clients use it.
const sharedBudgets = new Map<string, RateBudget>();

/**
 * The budget of one credential. `identity` is hashed before it is kept, so a raw token never
 * sits in the registry. The first caller's settings win for an identity.
 */
export function sharedRateBudget(identity: string, options: RateLimitOptions, clock: Clock): RateBudget {
  resolveRateLimit(options);
  const key = createHash("sha256").update(identity).digest("hex");
  let budget = sharedBudgets.get(key);
  if (budget === undefined) {
    budget = new RateBudget({ ...options, clock });
    sharedBudgets.set(key, budget);
  }
  return budget;
}
