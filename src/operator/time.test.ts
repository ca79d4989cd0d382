import { describe, expect, it } from "vitest";
import { isoSeconds } from "./time.ts";

describe("isoSeconds", () => {
  it("writes a time to the second, as Kubernetes stores metav1.Time, from a Date, milliseconds or a string", () => {
    expect(isoSeconds(new Date("2026-01-02T03:04:05.678Z"))).toBe("2026-01-02T03:04:05Z");
    expect(isoSeconds(Date.parse("2026-01-02T03:04:05.000Z"))).toBe("2026-01-02T03:04:05Z");
    expect(isoSeconds("2026-01-02T04:04:05.1+01:00")).toBe("2026-01-02T03:04:05Z");
  });
});
