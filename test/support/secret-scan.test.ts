import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formatFindings, scanFiles, scanText, type PlantedSecret } from "./secret-scan.ts";

const password = "pl4nted-P@ss/w0rd+x";
const token = "mds_tok_cplantedtokenvalue0123456789";
const secrets: PlantedSecret[] = [
  { name: "password", value: password },
  { name: "token", value: token },
];

describe("scanText", () => {
  it("finds a secret as is and says where", () => {
    const findings = scanText(`line one\n{"msg":"auth","token":"${token}"}\n`, secrets, "op.log");
    expect(findings).toEqual([{ secret: "token", form: "plain", where: "op.log", line: 2 }]);
  });

  it("finds a password percent-encoded inside a connection string", () => {
    const url = `postgresql://u:${encodeURIComponent(password)}@h:5432/d`;
    expect(scanText(url, secrets, "x")).toEqual([{ secret: "password", form: "url-encoded", where: "x", line: 1 }]);
  });

  it("finds a secret base64-encoded at every alignment inside a larger blob", () => {
    for (const prefix of ["", "a", "ab", "abc"]) {
      for (const suffix of ["", "z", "zz"]) {
        const blob = Buffer.from(`${prefix}DATABASE_URL=postgresql://u:${password}@h/d${suffix}`).toString("base64");
        const findings = scanText(`data: ${blob}`, secrets, "dump");
        expect(
          findings.map((f) => f.secret),
          `prefix ${prefix.length} suffix ${suffix.length}`,
        ).toEqual(["password"]);
      }
    }
  });

  it("finds the base64url form and the JSON-escaped form", () => {
    const quoted = 'pass"word\\with-quotes';
    const s: PlantedSecret[] = [{ name: "quoted", value: quoted }];
    expect(scanText(JSON.stringify({ p: quoted }), s, "j")[0]?.form).toBe("json-escaped");
    const url64 = Buffer.from(`xx${token}`).toString("base64url");
    expect(scanText(url64, secrets, "u").map((f) => f.secret)).toEqual(["token"]);
  });

  it("reports nothing for clean text, and never prints a secret's value", () => {
    expect(scanText("GET /v1/databases 200 id=db_c123 user=u_abc", secrets, "clean")).toEqual([]);
    const report = formatFindings(scanText(token, secrets, "f"));
    expect(report).toBe("token (plain) in f:1");
    expect(report).not.toContain(token);
  });

  it("refuses secrets too short to scan for meaningfully", () => {
    expect(() => scanText("x", [{ name: "short", value: "abc" }], "x")).toThrow(/shorter than 8/);
  });
});

describe("scanFiles", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "secret-scan-"));
    await writeFile(join(dir, "a.log"), "ok\nok\n");
    await writeFile(join(dir, "b.log"), `ok\nconnecting with ${Buffer.from(password).toString("base64")}\n`);
  });
  afterAll(async () => rm(dir, { recursive: true, force: true }));

  it("scans every file, skips missing ones and names file and line", async () => {
    const findings = await scanFiles([join(dir, "a.log"), join(dir, "b.log"), join(dir, "missing.log")], secrets);
    expect(findings).toEqual([{ secret: "password", form: "base64", where: join(dir, "b.log"), line: 2 }]);
  });
});
