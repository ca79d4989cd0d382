/**
 * Token buckets by key, in memory (each replica enforces its own share). Keys are workspaces for the API budget and
 * client addresses for authentication attempts (see http/request.ts).
 *
 * Memory is bounded by `maxKeys` without forgetting active clients: past the bound, buckets that have refilled are
 * dropped first (a full bucket is the same as none), and only if that is not enough the least recently seen ones.
 */
export class RateLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  private readonly perSecond: number;
  private readonly burst: number;
  private readonly maxKeys: number;
  private readonly now: () => number;

  constructor(options: { perSecond: number; burst: number; maxKeys?: number; now?: () => number }) {
    this.perSecond = options.perSecond;
    this.burst = options.burst;
    this.maxKeys = options.maxKeys ?? 100_000;
    this.now = options.now ?? (() => Date.now());
  }

  get size(): number {
    return this.buckets.size;
  }

  /** Takes one request from the key's budget: 0 if allowed, else the seconds to wait before retrying. */
  take(key: string): number {
    const bucket = this.refilled(key);
    // Re-inserted on every use, so the map's order is least recently seen first.
    this.buckets.delete(key);
    this.buckets.set(key, bucket);
    if (this.buckets.size > this.maxKeys) this.shrink();
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return this.wait(bucket.tokens);
  }

  /** The seconds to wait if the key's budget is spent now, else 0; takes nothing. */
  exhausted(key: string): number {
    if (!this.buckets.has(key)) return 0;
    const { tokens } = this.refilled(key);
    return tokens >= 1 ? 0 : this.wait(tokens);
  }

  private refilled(key: string): { tokens: number; at: number } {
    const now = this.now();
    const bucket = this.buckets.get(key) ?? { tokens: this.burst, at: now };
    bucket.tokens = Math.min(this.burst, bucket.tokens + ((now - bucket.at) / 1000) * this.perSecond);
    bucket.at = now;
    return bucket;
  }

  private wait(tokens: number): number {
    return Math.max(1, Math.ceil((1 - tokens) / this.perSecond));
  }

  private shrink(): void {
    const now = this.now();
    for (const [key, b] of this.buckets) {
      if (b.tokens + ((now - b.at) / 1000) * this.perSecond >= this.burst) this.buckets.delete(key);
    }
    // Still over (every client is active): drop the least recently seen down to 90%, so this runs rarely.
    const target = Math.floor(this.maxKeys * 0.9);
    for (const key of this.buckets.keys()) {
      if (this.buckets.size <= target) break;
      this.buckets.delete(key);
    }
  }
}
