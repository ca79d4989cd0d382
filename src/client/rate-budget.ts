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
 */
export class RateBudget {
  readonly requestsPerSecond: number;
  readonly burst: number;
  readonly #clock: Clock;
  #tokens: number;
  #refilledAt: number;
  #pausedUntil = 0;

  constructor(options: RateLimitOptions & { clock: Clock }) {
    const { requestsPerSecond, burst } = resolveRateLimit(options);
    this.requestsPerSecond = requestsPerSecond;
    this.burst = burst;
    this.#clock = options.clock;
    this.#tokens = burst;
    this.#refilledAt = options.clock.now();
  }

  /** Milliseconds until which every caller waits (0 when not paused). */
  get pausedUntil(): number {
    return this.#pausedUntil;
  }

  /** Holds every caller until `until` (ms since epoch); an earlier pause never shortens a later one. */
  pauseUntil(until: number): void {
    if (until > this.#pausedUntil) this.#pausedUntil = until;
  }

  /** Waits for a token; returns how long the caller was held (ms). */
  async acquire(signal?: AbortSignal): Promise<number> {
    const started = this.#clock.now();
    for (;;) {
      signal?.throwIfAborted();
      const now = this.#clock.now();
      if (this.#pausedUntil > now) {
        await this.#clock.sleep(this.#pausedUntil - now, signal);
        continue;
      }
      this.#refill(now);
      if (this.#tokens >= 1) {
        this.#tokens -= 1;
        return this.#clock.now() - started;
      }
      await this.#clock.sleep(Math.ceil(((1 - this.#tokens) * 1000) / this.requestsPerSecond), signal);
    }
  }

  #refill(now: number): void {
    const elapsed = Math.max(0, now - this.#refilledAt);
    this.#tokens = Math.min(this.burst, this.#tokens + (elapsed * this.requestsPerSecond) / 1000);
    this.#refilledAt = now;
  }
}

/** The settings with defaults filled in; throws a TypeError naming a bad one. */
export function resolveRateLimit(options: RateLimitOptions): Required<RateLimitOptions> {
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
