import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient, MdsApiError, RateLimitedError } from "../../src/client/index.ts";
import { startTestService, type TestService } from "../support/test-service.ts";

// The client against the real service's per-token budget: a 429 is a RateLimitedError carrying
// the service's Retry-After, and a client whose own budget fits the service's never sees one.

describe("client against the service's rate limit", () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService({ service: { rateLimit: { perSecond: 5, burst: 2 } } });
  });

  afterAll(async () => {
    await service?.stop();
  });

  it("surfaces a 429 as RateLimitedError with the service's Retry-After", async () => {
    const token = await service.createToken("burst");
    const client = createClient({ baseUrl: service.url, token, rateLimit: false, retry: { maxAttempts: 1 } });
    // 12 at once against a burst of 2: even a slow machine cannot spread them over the 2 s it would take.
    const results = await Promise.allSettled(Array.from({ length: 12 }, () => client.listDatabases()));
    const errors = results.flatMap((r) => (r.status === "rejected" ? [r.reason] : []));
    expect(errors.length).toBeGreaterThan(0);
    for (const error of errors) {
      expect(error).toBeInstanceOf(RateLimitedError);
      expect(error).toMatchObject({ status: 429, code: "rate_limited", retryable: true });
      expect((error as MdsApiError).retryAfterMs).toBeGreaterThanOrEqual(1000);
    }
  });

  it("stays under the service's budget when its own budget fits it", async () => {
    const token = await service.createToken("polite");
    const outcomes: string[] = [];
    const client = createClient({
      baseUrl: service.url,
      token,
      // Below the service's 5/s, so that timers firing late on a loaded machine cannot bunch calls past its burst.
      rateLimit: { requestsPerSecond: 3, burst: 1 },
      hooks: { onAttempt: (e) => outcomes.push(e.outcome) },
    });
    await Promise.all(Array.from({ length: 6 }, () => client.listDatabases()));
    expect(outcomes).toEqual(Array(6).fill("ok"));
  });
});
