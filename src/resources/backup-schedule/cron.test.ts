import { describe, expect, it } from "vitest";
import { CronError, latestSlot, nextSlot, parseCron } from "./cron.ts";

const t = (iso: string) => Date.parse(iso);
const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());

describe("cron", () => {
  it("finds the next slot of common schedules, in UTC", () => {
    const from = t("2026-11-26T04:20:30Z"); // a Thursday
    expect(iso(nextSlot(parseCron("*/15 * * * *"), from))).toBe("2026-11-26T04:30:00.000Z");
    expect(iso(nextSlot(parseCron("0 3 * * *"), from))).toBe("2026-11-27T03:00:00.000Z");
    expect(iso(nextSlot(parseCron("@daily"), from))).toBe("2026-11-27T00:00:00.000Z");
    expect(iso(nextSlot(parseCron("@hourly"), from))).toBe("2026-11-26T05:00:00.000Z");
    expect(iso(nextSlot(parseCron("30 2 * * 1-5"), t("2026-11-27T03:00:00Z")))).toBe("2026-11-30T02:30:00.000Z");
    expect(iso(nextSlot(parseCron("0 0 1 */3 *"), from))).toBe("2027-01-01T00:00:00.000Z");
    expect(iso(nextSlot(parseCron("0 12 * * 7"), from))).toBe("2026-11-29T12:00:00.000Z"); // 7 is Sunday too
    expect(iso(nextSlot(parseCron("5,10 8-9 * * *"), t("2026-11-26T08:07:00Z")))).toBe("2026-11-26T08:10:00.000Z");
    // Strictly after: a slot equal to `after` is not the next one.
    expect(iso(nextSlot(parseCron("0 * * * *"), t("2026-11-26T05:00:00Z")))).toBe("2026-11-26T06:00:00.000Z");
  });

  it("matches either day field when both are restricted (cron's rule), and never for a date that does not exist", () => {
    // The 1st of the month or any Monday.
    expect(iso(nextSlot(parseCron("0 0 1 * 1"), t("2026-11-26T00:00:00Z")))).toBe("2026-11-30T00:00:00.000Z");
    expect(nextSlot(parseCron("0 0 30 2 *"), t("2026-11-26T00:00:00Z"))).toBeUndefined();
  });

  it("takes only the latest missed slot after downtime, none when there is none in the window", () => {
    const c = parseCron("0 * * * *");
    expect(iso(latestSlot(c, t("2026-11-26T01:00:00Z"), t("2026-11-26T09:30:00Z")))).toBe("2026-11-26T09:00:00.000Z");
    expect(latestSlot(c, t("2026-11-26T09:00:00Z"), t("2026-11-26T09:59:59Z"))).toBeUndefined();
    // A per-minute schedule down for a year is answered at once.
    const started = Date.now();
    expect(iso(latestSlot(parseCron("* * * * *"), t("2025-11-26T00:00:00Z"), t("2026-11-26T09:30:20Z")))).toBe(
      "2026-11-26T09:30:00.000Z",
    );
    expect(iso(latestSlot(parseCron("0 0 1 1 *"), t("2020-01-01T00:00:00Z"), t("2026-11-26T09:30:20Z")))).toBe(
      "2026-01-01T00:00:00.000Z",
    );
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it("refuses what it does not support, saying which field is wrong", () => {
    const refused = (e: string) => {
      try {
        parseCron(e);
        return "accepted";
      } catch (err) {
        expect(err).toBeInstanceOf(CronError);
        return (err as Error).message;
      }
    };
    expect(refused("* * * *")).toMatch(/expected 5 fields/);
    expect(refused("60 * * * *")).toMatch(/minute: 60 is outside 0-59/);
    expect(refused("* 24 * * *")).toMatch(/hour: 24/);
    expect(refused("* * 0 * *")).toMatch(/day of month: 0/);
    expect(refused("* * * 13 *")).toMatch(/month: 13/);
    expect(refused("* * * * MON")).toMatch(/day of week: "MON" is not a number/);
    expect(refused("*/0 * * * *")).toMatch(/a step of 0/);
    expect(refused("5-1 * * * *")).toMatch(/empty range/);
    expect(refused("@every 5m")).toMatch(/unknown macro/);
    expect(refused("1,,2 * * * *")).toMatch(/malformed/);
  });
});
