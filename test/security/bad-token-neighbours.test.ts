import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestService, type TestService } from "../support/test-service.ts";
import { client, sql } from "../service/helpers.ts";

// A bad token next door (service side). In a cluster every team's requests come from the operator's pod, so they share
// one client address. Team B puts a garbage token in its credentials and loops: its failures must cost B, never
// team A, whose valid token comes from the same address. A guesser is still slowed: failures are limited per
// address and token prefix, so the same garbage (or guesses at one token) is refused before it is looked up.

let service: TestService;

beforeAll(async () => {
  service = await startTestService({ service: { authRateLimit: { perSecond: 0.01, burst: 10 } } });
});
afterAll(async () => {
  await service?.stop();
});

const garbage = "mds_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX";
const form = (fields: Record<string, string>) =>
  fetch(`${service.url}/oauth/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams(fields).toString(),
  });

describe("a bad token costs its sender, not its neighbours at the same address", () => {
  it("team B's garbage bearer token is refused with 429 once its budget is spent; team A's valid token from the same address is answered every time", async () => {
    const teamA = client(service, await service.createToken("team-a"));
    const teamB = client(service, garbage);
    const seen: number[] = [];
    for (let i = 0; i < 30 && seen.at(-1) !== 429; i++) seen.push((await teamB("GET", "/v1/projects")).status);
    expect(seen.at(-1)).toBe(429);
    expect(seen.slice(0, -1).every((s) => s === 401)).toBe(true);
    // B keeps looping while A works: A is never refused, B stays refused.
    for (let i = 0; i < 20; i++) {
      expect((await teamA("GET", "/v1/projects")).status).toBe(200);
      const b = await teamB("GET", "/v1/projects");
      expect(b.status).toBe(429);
      expect(b.body.error.message).toMatch(/too many failed authentications with this token/);
    }
    // Guesses that share the spent token's prefix are refused too (a guesser does not get a fresh budget per guess).
    expect(
      (await client(service, `${garbage.slice(0, 20)}YYYYYYYYYYYYYYYYYYYYYYYYYYY`)("GET", "/v1/projects")).status,
    ).toBe(429);
  });

  it("team B's rotating garbage tokens never lock out team A either", async () => {
    const teamA = client(service, await service.createToken("team-a2"));
    for (let i = 0; i < 40; i++) {
      const rotated = `mds_${String(i).padStart(4, "0")}${"Z".repeat(39)}`;
      expect([401, 429]).toContain((await client(service, rotated)("GET", "/v1/projects")).status);
      expect((await teamA("GET", "/v1/projects")).status).toBe(200);
    }
  });

  it("a token of the wrong shape is refused without a lookup, with a clear 401", async () => {
    const res = await client(service, "not-a-token-at-all")("GET", "/v1/projects");
    expect(res.status).toBe(401);
    expect(res.body.error.message).toMatch(/invalid, expired or revoked token/);
  });

  it("/oauth/token: garbage client secrets spend their own budget; a valid client_credentials grant from the same address succeeds", async () => {
    const [row] = await sql<{ id: string }>(service.controlUrl, "SELECT id FROM tokens WHERE name = 'embedded'");
    const statuses: number[] = [];
    for (let i = 0; i < 30 && statuses.at(-1) !== 429; i++)
      statuses.push(
        (await form({ grant_type: "client_credentials", client_id: row!.id, client_secret: garbage })).status,
      );
    expect(statuses.at(-1)).toBe(429);
    for (let i = 0; i < 3; i++) {
      const ok = await form({ grant_type: "client_credentials", client_id: row!.id, client_secret: service.token });
      expect(ok.status).toBe(200);
    }
    expect((await form({ grant_type: "client_credentials", client_id: row!.id, client_secret: garbage })).status).toBe(
      429,
    );
  });
});
