import { describe, expect, it } from "vitest";
import { expiryOf, parseDuration } from "./expiry.ts";

// The expiry is computed once and kept in status: these are the rules by which a stored time holds or moves.

const created = "2026-01-01T00:00:00Z";
const at = (iso: string) => new Date(iso);

describe("expiryOf", () => {
  it("reads Go/Kubernetes durations and nothing else", () => {
    expect(parseDuration("72h")).toBe(72 * 3_600_000);
    expect(parseDuration("1h30m")).toBe(90 * 60_000);
    expect(parseDuration("1.5s")).toBe(1_500);
    expect(parseDuration("500ms")).toBe(500);
    for (const bad of ["", "3d", "h", "72", "-1h", "1h 30m"]) expect(parseDuration(bad)).toBeUndefined();
  });

  it("counts expireAfter from the creation (the API server's clock), whatever the operator's clock says", () => {
    const first = expiryOf({ expireAfter: "72h" }, created, undefined, at("2026-01-02T05:00:00Z"))!;
    expect(first.fields).toEqual({
      expiresAt: "2026-01-04T00:00:00Z",
      expiryCountsFrom: created,
      expiryRenewal: undefined,
    });
    // A restarted or skewed operator reads what was stored: the same time.
    const again = expiryOf({ expireAfter: "72h" }, created, first.fields, at("2030-01-01T00:00:00Z"))!;
    expect(again.fields["expiresAt"]).toBe("2026-01-04T00:00:00Z");
    // The warning: one hour before (a tenth of 72 h is longer).
    expect(first.warnAt?.toISOString()).toBe("2026-01-03T23:00:00.000Z");
  });

  it("restarts the count when expiryRenewal changes (a new push), and only then", () => {
    const v1 = expiryOf({ expireAfter: "72h", expiryRenewal: "sha1" }, created, undefined, at(created))!;
    expect(v1.fields["expiresAt"]).toBe("2026-01-04T00:00:00Z");
    const same = expiryOf(
      { expireAfter: "72h", expiryRenewal: "sha1" },
      created,
      v1.fields,
      at("2026-01-02T00:00:00Z"),
    )!;
    expect(same.fields["expiresAt"]).toBe("2026-01-04T00:00:00Z");
    const pushed = expiryOf(
      { expireAfter: "72h", expiryRenewal: "sha2" },
      created,
      v1.fields,
      at("2026-01-02T00:00:00Z"),
    )!;
    expect(pushed.fields).toMatchObject({
      expiresAt: "2026-01-05T00:00:00Z",
      expiryCountsFrom: "2026-01-02T00:00:00Z",
      expiryRenewal: "sha2",
    });
    // A longer expireAfter counts from the same start.
    const longer = expiryOf(
      { expireAfter: "96h", expiryRenewal: "sha2" },
      created,
      pushed.fields,
      at("2026-01-03T00:00:00Z"),
    )!;
    expect(longer.fields["expiresAt"]).toBe("2026-01-06T00:00:00Z");
  });

  it("takes expiresAt as it is, warns a tenth of a short lifetime before, and clears status when the expiry goes", () => {
    const e = expiryOf({ expiresAt: "2026-01-01T00:10:00+00:00" }, created, undefined, at(created))!;
    expect(e.fields["expiresAt"]).toBe("2026-01-01T00:10:00Z");
    expect(e.warnAt?.toISOString()).toBe("2026-01-01T00:09:00.000Z");
    expect(expiryOf({}, created, undefined, at(created))).toBeUndefined();
    expect(expiryOf({}, created, e.fields, at(created))?.fields).toEqual({
      expiresAt: undefined,
      expiryCountsFrom: undefined,
      expiryRenewal: undefined,
    });
  });

  // The schema allows 32 characters of digits: "9999…h" is a valid-looking duration past any date JavaScript holds.
  it("refuses a duration too long for a date as an invalid spec, not a RangeError on every reconcile", () => {
    const huge = "9".repeat(31) + "h";
    expect(() => expiryOf({ expireAfter: huge }, created, undefined, at(created))).toThrow(
      expect.objectContaining({ reason: "InvalidSpec", message: expect.stringMatching(/too far/) }),
    );
    // A stored count start a team wrote into status that lands the expiry past the dates JavaScript holds: the same.
    expect(() =>
      expiryOf({ expireAfter: "72h" }, created, { expiryCountsFrom: "+275760-09-13T00:00:00Z" }, at(created)),
    ).toThrow(expect.objectContaining({ reason: "InvalidSpec" }));
  });
});
