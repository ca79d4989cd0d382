import { describe, expect, it } from "vitest";
import { decrypt, encrypt, parseKey, scramVerifier } from "./shared/crypto.ts";
import { ServiceError } from "./shared/errors.ts";
import { parseIdempotencyKey, requestHash } from "./domain/idempotency.ts";
import { decodeCursor, encodeCursor, paginate } from "./store/pagination.ts";
import { ident } from "./placement/provisioner.ts";
import { RateLimiter } from "./runtime/rate-limit.ts";

describe("rate limiter", () => {
  it("allows the burst, then asks to wait, then refills", () => {
    let now = 0;
    const limiter = new RateLimiter({ perSecond: 2, burst: 3, now: () => now });
    expect([limiter.take("a"), limiter.take("a"), limiter.take("a")]).toEqual([0, 0, 0]);
    expect(limiter.take("a")).toBe(1);
    expect(limiter.take("b")).toBe(0);
    now += 500;
    expect(limiter.take("a")).toBe(0);
    expect(limiter.take("a")).toBeGreaterThanOrEqual(1);
  });
});

describe("cursors", () => {
  it("round-trip and reject anything else with a 400", () => {
    const c = { ts: "2026-01-02T03:04:05.123456Z", id: "db_cabc" };
    expect(decodeCursor(encodeCursor(c))).toEqual(c);
    expect(decodeCursor(undefined)).toBeUndefined();
    for (const bad of [
      "",
      "!!",
      Buffer.from("x|y").toString("base64url"),
      Buffer.from("2026-13-99T00:00:00.000000Z|db_x").toString("base64url"),
    ]) {
      const err = (() => {
        try {
          decodeCursor(bad);
        } catch (e) {
          return e;
        }
      })();
      expect(err).toBeInstanceOf(ServiceError);
      expect((err as ServiceError).status).toBe(400);
    }
  });

  it("paginate hands out a cursor only when there is more", () => {
    const rows = [1, 2, 3].map((i) => ({ id: `db_${i}`, cursor_ts: `2026-01-01T00:00:0${i}.000000Z` }));
    expect(paginate(rows, 3).pagination).toEqual({ hasMore: false, nextCursor: null });
    const page = paginate(rows, 2);
    expect(page.items).toHaveLength(2);
    expect(decodeCursor(page.pagination.nextCursor!)).toEqual({ ts: rows[1]!.cursor_ts, id: "db_2" });
  });
});

describe("idempotency", () => {
  it("hashes bodies canonically (key order does not matter, values do)", () => {
    expect(requestHash("POST", "/v1/x", { a: 1, b: [1, { c: 2, d: 3 }] })).toBe(
      requestHash("POST", "/v1/x", { b: [1, { d: 3, c: 2 }], a: 1 }),
    );
    expect(requestHash("POST", "/v1/x", { a: 1 })).not.toBe(requestHash("POST", "/v1/x", { a: 2 }));
    expect(requestHash("POST", "/v1/x", { a: 1 })).not.toBe(requestHash("POST", "/v1/y", { a: 1 }));
  });
  it("accepts printable keys only", () => {
    expect(parseIdempotencyKey("k8s:ns/name-1")).toBe("k8s:ns/name-1");
    expect(parseIdempotencyKey(undefined)).toBeUndefined();
    expect(() => parseIdempotencyKey("a b")).toThrow(ServiceError);
    expect(() => parseIdempotencyKey("x".repeat(256))).toThrow(ServiceError);
  });
});

describe("crypto", () => {
  it("encrypts with authentication: tampering is detected", () => {
    const key = parseKey("11".repeat(32));
    const sealed = encrypt(key, "secret body");
    expect(sealed.toString("latin1")).not.toContain("secret");
    expect(decrypt(key, sealed)).toBe("secret body");
    sealed[sealed.length - 1]! ^= 1;
    expect(() => decrypt(key, sealed)).toThrow();
    expect(() => parseKey("short")).toThrow(/32 bytes/);
  });
  it("makes SCRAM verifiers PostgreSQL accepts in shape, never containing the password", async () => {
    const v = await scramVerifier("hunter2hunter2");
    expect(v).toMatch(/^SCRAM-SHA-256\$4096:[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+$/);
    expect(v).not.toContain("hunter2");
  });
  it("refuses identifiers it did not generate", () => {
    expect(ident("mds_cabc_owner")).toBe('"mds_cabc_owner"');
    expect(() => ident('x"; drop')).toThrow();
  });
});
