import { describe, expect, it } from "vitest";
import { sweepIntervalMs } from "./index.ts";

// The operator's timers that are not a reconcile's: the credentials guard's sweep (credentials-guard.ts).

describe("credentials guard sweep interval", () => {
  it("is the settled interval, but at most a minute, so a standby that becomes leader releases Secrets soon", () => {
    // The default settled interval (5 min) and longer ones: a minute.
    expect(sweepIntervalMs(300_000)).toBe(60_000);
    expect(sweepIntervalMs(3_600_000)).toBe(60_000);
    // Shorter ones are kept.
    expect(sweepIntervalMs(60_000)).toBe(60_000);
    expect(sweepIntervalMs(10_000)).toBe(10_000);
  });
});
