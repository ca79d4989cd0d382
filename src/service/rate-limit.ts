/** Per-token token buckets (in memory: each replica enforces its own share). */
export class RateLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  private readonly perSecond: number;
  private readonly burst: number;
  private readonly now: () => number;

  constructor(options: { perSecond: number; burst: number; now?: () => number }) {
    this.perSecond = options.perSecond;
    this.burst = options.burst;
    this.now = options.now ?? (() => Date.now());
  }

  /** Takes one request from the key's budget: 0 if allowed, else the seconds to wait before retrying. */
  take(key: string): number {
    const now = this.now();
    const bucket = this.buckets.get(key) ?? { tokens: this.burst, at: now };
    bucket.tokens = Math.min(this.burst, bucket.tokens + ((now - bucket.at) / 1000) * this.perSecond);
    bucket.at = now;
    this.buckets.set(key, bucket);
    if (this.buckets.size > 100_000) this.buckets.clear();
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return Math.max(1, Math.ceil((1 - bucket.tokens) / this.perSecond));
  }
}
