import fc from "fast-check";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newId } from "../../src/contract/index.ts";
import { startTestService, type TestService } from "../support/test-service.ts";
import { client, eventually, sql, type Json } from "../service/helpers.ts";

// Every string a request brings, wherever it comes from (path, query, JSON body, the Idempotency-Key header), is
// checked once before it reaches PostgreSQL: a NUL, a control character, a lone surrogate (as JSON escapes it, or
// as the UTF-8 bytes of one in a URL), an overlong or otherwise invalid UTF-8 sequence, or a value past 1024
// characters is a 400 that names where it was, at every route. A NUL in `?branchId=` or `source.databaseId` was a 500.

type Route = { method: string; path: string; query?: string[]; body?: Json; form?: boolean };

/** Raw HTTP/1.1: no client between us and the service refuses or re-encodes what we send. */
function rawRequest(
  url: string,
  input: { method: string; target: string; headers: Record<string, Buffer | string>; body?: Buffer },
): Promise<{ status: number; body: Json }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    socket.on("data", (d: Buffer) => chunks.push(d));
    socket.on("error", reject);
    socket.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      const raw = text.slice(text.indexOf("\r\n\r\n") + 4);
      let body: Json = raw;
      try {
        body = JSON.parse(raw);
      } catch {
        // not JSON: kept as text, and the test says so
      }
      resolve({ status, body });
    });
    const head = [
      `${input.method} ${input.target} HTTP/1.1`,
      `Host: ${hostname}`,
      "Connection: close",
      ...(input.body ? [`Content-Length: ${input.body.length}`] : []),
    ].join("\r\n");
    const extra = Object.entries(input.headers).map(([k, v]) =>
      Buffer.concat([Buffer.from(`\r\n${k}: `), Buffer.isBuffer(v) ? v : Buffer.from(v, "latin1")]),
    );
    // Written, not ended: Node's server drops a request whose client half-closed before the answer.
    socket.write(Buffer.concat([Buffer.from(head), ...extra, Buffer.from("\r\n\r\n"), input.body ?? Buffer.alloc(0)]));
  });
}

/** Percent-encodes UTF-8, and a lone surrogate as the three bytes UTF-8 would give it were it allowed. */
function percentEncode(text: string): string {
  let out = "";
  for (const ch of text) {
    const code = ch.codePointAt(0)!;
    if (code >= 0xd800 && code <= 0xdfff)
      out += [0xe0 | (code >> 12), 0x80 | ((code >> 6) & 0x3f), 0x80 | (code & 0x3f)]
        .map((b) => `%${b.toString(16).toUpperCase()}`)
        .join("");
    else out += encodeURIComponent(ch);
  }
  return out;
}

const printable = fc.string({ unit: fc.constantFrom(..."abcXYZ019_-."), maxLength: 8 });
/** A bad value as a string (for URLs it is percent-encoded, in JSON escaped), or raw percent-encoding (URLs only). */
type Bad = { text: string } | { encoded: string };
const badText: fc.Arbitrary<Bad> = fc.oneof(
  fc.tuple(printable, printable).map(([a, b]) => ({ text: `${a}\0${b}` })),
  fc
    .tuple(
      printable,
      fc.integer({ min: 1, max: 0x9f }).filter((c) => c < 0x20 || c >= 0x7f),
      printable,
    )
    .map(([a, c, b]) => ({ text: `${a}${String.fromCharCode(c)}${b}` })),
  fc
    .tuple(printable, fc.integer({ min: 0xd800, max: 0xdfff }), printable)
    .map(([a, c, b]) => ({ text: `${a}${String.fromCharCode(c)}${b}` })),
  fc.integer({ min: 1025, max: 3000 }).map((n) => ({ text: `c${"a".repeat(n)}` })),
);
const badEncoding: fc.Arbitrary<Bad> = fc
  .constantFrom("%C0%80", "%E0%80%80", "%C1%BF", "%ED%A0%80", "%ED%BF%BF", "%FF", "%C3", "%E2%82", "%F8%88%80%80%80")
  .map((e) => ({ encoded: `x${e}y` }));
const inUrl = fc.oneof(badText, badEncoding);
/** Header values are bytes: what reaches the service there is a C1 control (Latin-1) or length. */
const inHeader = fc.oneof(
  fc.integer({ min: 0x80, max: 0x9f }).map((c) => Buffer.from([0x6b, c, 0x6b])),
  fc.integer({ min: 1025, max: 3000 }).map((n) => Buffer.from("k".repeat(n))),
);

const urlForm = (bad: Bad) => ("encoded" in bad ? bad.encoded : percentEncode(bad.text));

/** Every string leaf of a body, by its path. */
function leaves(value: Json, at: string[] = []): string[][] {
  if (typeof value === "string") return [at];
  if (value && typeof value === "object") return Object.entries(value).flatMap(([k, v]) => leaves(v, [...at, k]));
  return [];
}
function withLeaf(value: Json, at: string[], leaf: string): Json {
  if (at.length === 0) return leaf;
  return { ...value, [at[0]!]: withLeaf(value[at[0]!], at.slice(1), leaf) };
}

const ourMessage =
  /(contains a NUL character|contains a control character|is not well-formed Unicode|is longer than 1024 characters|is not valid percent-encoded UTF-8)/;

describe("one check for every string of every request", () => {
  let service: TestService;
  let token: string;
  let routes: Route[];
  let before: { projects: number; databases: number; branches: number };
  const counts = async () => {
    const [row] = await sql<{ projects: number; databases: number; branches: number }>(
      service.controlUrl,
      `SELECT (SELECT count(*)::int FROM projects) AS projects, (SELECT count(*)::int FROM databases) AS databases,
              (SELECT count(*)::int FROM branches) AS branches`,
    );
    return row!;
  };

  beforeAll(async () => {
    service = await startTestService({ service: { rateLimit: { perSecond: 10_000, burst: 10_000 } } });
    token = await service.createToken("input-attacker");
    const api = client(service, token);
    const project = (await api("POST", "/v1/projects", { name: "target" })).body.data;
    const db = project.database.id as string;
    await eventually(async () => expect((await api("GET", `/v1/databases/${db}`)).body.data.status).toBe("ready"));
    const branch = (await api("POST", `/v1/projects/${project.id}/branches`, { gitName: "main" })).body.data.id;
    const p = project.id as string;
    // Real ids where reading them reaches PostgreSQL; made-up ones where a request that got through would change data.
    const fake = { db: newId("database"), branch: newId("branch"), conn: newId("connection"), bkp: newId("backup") };
    routes = [
      { method: "POST", path: "/v1/projects", body: { name: "n", region: "us-east-1", logicalId: "a" } },
      { method: "GET", path: "/v1/projects", query: ["cursor", "limit"] },
      { method: "GET", path: `/v1/projects/${p}` },
      { method: "DELETE", path: `/v1/projects/${newId("project")}` },
      {
        method: "POST",
        path: `/v1/projects/${p}/databases`,
        body: { name: "n", logicalId: "l", source: { type: "backup", databaseId: db, backupId: fake.bkp } },
      },
      { method: "GET", path: `/v1/projects/${p}/databases`, query: ["branchId", "branchGitName", "cursor"] },
      {
        method: "POST",
        path: "/v1/databases",
        body: { projectId: p, name: "n", branchGitName: "main", source: { type: "database", databaseId: db } },
      },
      { method: "GET", path: "/v1/databases", query: ["projectId", "branchId", "branchGitName", "cursor", "limit"] },
      { method: "GET", path: `/v1/databases/${db}` },
      { method: "PATCH", path: `/v1/databases/${fake.db}`, body: { name: "n", branchId: branch, logicalId: "l" } },
      { method: "DELETE", path: `/v1/databases/${fake.db}` },
      {
        method: "POST",
        path: `/v1/databases/${fake.db}/restore`,
        body: { source: { type: "backup", databaseId: db, backupId: fake.bkp } },
      },
      { method: "GET", path: `/v1/databases/${db}/usage` },
      { method: "GET", path: `/v1/databases/${db}/backups`, query: ["cursor", "limit"] },
      { method: "POST", path: `/v1/databases/${fake.db}/backups`, body: { note: "x" } },
      { method: "DELETE", path: `/v1/databases/${fake.db}/backups/${fake.bkp}` },
      { method: "GET", path: `/v1/databases/${db}/connections`, query: ["cursor"] },
      { method: "POST", path: `/v1/databases/${fake.db}/connections`, body: { name: "n" } },
      { method: "POST", path: "/v1/connections", body: { databaseId: fake.db, name: "n" } },
      { method: "GET", path: "/v1/connections", query: ["databaseId", "cursor"] },
      { method: "GET", path: `/v1/connections/${fake.conn}` },
      { method: "POST", path: `/v1/connections/${fake.conn}/rotate` },
      { method: "DELETE", path: `/v1/connections/${fake.conn}` },
      { method: "POST", path: `/v1/projects/${p}/branches`, body: { gitName: "feature" } },
      { method: "GET", path: `/v1/projects/${p}/branches`, query: ["gitName", "gitNameContains", "cursor"] },
      { method: "GET", path: `/v1/branches/${branch}` },
      { method: "PATCH", path: `/v1/branches/${fake.branch}`, body: { gitName: "main" } },
      { method: "DELETE", path: `/v1/branches/${fake.branch}` },
      { method: "GET", path: "/v1/regions/postgres" },
      {
        method: "POST",
        path: "/oauth/token",
        body: { grant_type: "client_credentials", client_id: "tok_x", client_secret: "s" },
      },
    ];
    before = await counts();
  });
  afterAll(async () => {
    await service?.stop();
  });

  type Position =
    | { kind: "path"; segment: number }
    | { kind: "query"; name: string }
    | { kind: "body"; at: string[] }
    | { kind: "header" };
  const positionsOf = (r: Route): Position[] => [
    ...r.path
      .split("/")
      .map((s, i) => ({ s, i }))
      .filter(({ s, i }) => i > 1 && /_/.test(s))
      .map(({ i }) => ({ kind: "path" as const, segment: i })),
    ...[...(r.query ?? []), "x"].map((name) => ({ kind: "query" as const, name })),
    // A route without a body never reads one (GET, DELETE): what it ignores reaches nothing.
    ...(r.method === "POST" || r.method === "PATCH" ? leaves(r.body ?? { x: "" }) : []).map((at) => ({
      kind: "body" as const,
      at,
    })),
    ...(r.method === "POST" ? [{ kind: "header" as const }] : []),
  ];

  async function send(r: Route, at: Position, bad: Bad, header: Buffer) {
    const segments = r.path.split("/");
    if (at.kind === "path") segments[at.segment] = urlForm(bad);
    const query = at.kind === "query" ? `?${encodeURIComponent(at.name)}=${urlForm(bad)}` : "";
    const bodyValue =
      at.kind === "body" ? withLeaf(r.body ?? { x: "" }, at.at, "text" in bad ? bad.text : "x\0") : r.body;
    const body = bodyValue === undefined ? undefined : Buffer.from(JSON.stringify(bodyValue), "utf8");
    const headers: Record<string, Buffer | string> = { Authorization: `Bearer ${token}` };
    if (body) headers["Content-Type"] = "application/json";
    if (at.kind === "header") headers["Idempotency-Key"] = header;
    return rawRequest(service.url, {
      method: r.method,
      target: `${segments.join("/")}${query}`,
      headers,
      ...(body ? { body } : {}),
    });
  }

  const where = (at: Position) =>
    at.kind === "path"
      ? /(a path segment|the path)/
      : at.kind === "query"
        ? new RegExp(`query parameter "${at.name}"`)
        : at.kind === "body"
          ? new RegExp(`^invalid request body: ${at.at.join(".").replaceAll(".", "\\.")}: `)
          : /the Idempotency-Key header/;

  /** 400, but 422 where the public API answers a bad gitName so (a branch's create and update). */
  const expectedStatus = (r: Route, at: Position) =>
    at.kind === "body" && at.at.join(".") === "gitName" && /branches/.test(r.path) ? 422 : 400;

  it("answers every bad string at every route and position with a 400 naming where it was", async () => {
    const cases = routes.flatMap((r) => positionsOf(r).map((at) => ({ r, at })));
    expect(cases.length).toBeGreaterThan(80);
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...cases), inUrl, inHeader, async ({ r, at }, bad, header) => {
        const res = await send(r, at, bad, header);
        const label = `${r.method} ${r.path} ${JSON.stringify(at)} ${JSON.stringify(bad).slice(0, 80)}`;
        expect(res.status, `${label}: ${JSON.stringify(res.body).slice(0, 300)}`).toBe(expectedStatus(r, at));
        expect(res.body?.error?.code, label).toBe(expectedStatus(r, at) === 400 ? "invalid_request" : "unprocessable");
        expect(res.body.error.message, label).toMatch(ourMessage);
        expect(res.body.error.message, label).toMatch(where(at));
      }),
      { numRuns: 400 },
    );
    // Every position of every route, each kind of bad value at least once, beyond what the sampling hit.
    for (const { r, at } of cases)
      for (const bad of [{ text: "a\0b" }, { text: "a\ud800b" }, { text: "a\u0085b" }, { encoded: "a%C0%80b" }]) {
        if (at.kind !== "path" && at.kind !== "query" && "encoded" in bad) continue;
        const res = await send(r, at, bad, Buffer.from([0x6b, 0x85]));
        expect(res.status, `${r.method} ${r.path} ${JSON.stringify(at)} ${JSON.stringify(bad)}`).toBe(
          expectedStatus(r, at),
        );
        expect(res.body.error.message).toMatch(where(at));
      }
    expect(await counts()).toEqual(before);
  });

  it("refuses a body that is not valid UTF-8 (an overlong NUL, an encoded surrogate) rather than replacing it", async () => {
    for (const bytes of [[0xc0, 0x80], [0xed, 0xa0, 0x80], [0xff]]) {
      const body = Buffer.concat([Buffer.from('{"name":"a'), Buffer.from(bytes), Buffer.from('"}')]);
      const res = await rawRequest(service.url, {
        method: "POST",
        target: "/v1/projects",
        headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
        body,
      });
      expect(res.status).toBe(400);
      expect(res.body.error.message).toBe("request body is not valid UTF-8");
    }
    expect(await counts()).toEqual(before);
  });

  it("answers a header Node's parser refuses (a NUL, CR or a control byte in it) with a 400 in the API's shape", async () => {
    for (const bad of [[0x00], [0x0d], [0x01], [0x7f]]) {
      const res = await rawRequest(service.url, {
        method: "GET",
        target: "/v1/projects",
        headers: {
          Authorization: `Bearer ${token}`,
          "Idempotency-Key": Buffer.concat([Buffer.from("a"), Buffer.from(bad), Buffer.from("b")]),
        },
      });
      expect(res.status, JSON.stringify(bad)).toBe(400);
      expect(res.body.error.code).toBe("invalid_request");
      expect(res.body.error.message).toMatch(/not valid HTTP|Idempotency-Key header contains a control character/);
    }
    expect(await counts()).toEqual(before);
  });

  it("still takes every good value: the check refuses nothing the API accepts", async () => {
    const api = client(service, token);
    const created = await api("POST", "/v1/projects", { name: "naïve café ✓ 𝄞", logicalId: "a/b:c.d_e-f" });
    expect(created.status).toBe(201);
    const list = await api(
      "GET",
      `/v1/projects/${created.body.data.id}/branches?gitNameContains=${encodeURIComponent("fé/✓")}`,
    );
    expect(list.status).toBe(200);
  });
});
