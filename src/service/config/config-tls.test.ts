import { describe, expect, it } from "vitest";
import { RegionConfig } from "./config.ts";

describe("RegionConfig: sslmode against where clients connect", () => {
  const parse = (input: Record<string, unknown>) =>
    RegionConfig.safeParse({ adminUrl: "postgresql://postgres:pw@127.0.0.1:5432/postgres", ...input });
  // A region in the one-server shape becomes a region with one server.
  const server = (input: Record<string, unknown>) => parse(input).data?.servers[0];

  it("refuses sslmode disable, allow and prefer when clients reach a host that is not loopback, with a clear message", () => {
    for (const sslmode of ["disable", "allow", "prefer"]) {
      const result = parse({ host: "pg.example.com", sslmode });
      expect(result.success).toBe(false);
      const issue = result.error!.issues[0]!;
      expect(issue.path).toEqual(["sslmode"]);
      expect(issue.message).toMatch(
        /pg\.example\.com, which is not a loopback address; use require, verify-ca or verify-full/,
      );
    }
    // The admin URL's host counts when there is no public host, and so does a remote pooler.
    expect(parse({ adminUrl: "postgresql://postgres:pw@10.0.0.5:5432/postgres", sslmode: "disable" }).success).toBe(
      false,
    );
    expect(parse({ sslmode: "disable", pooler: { host: "bouncer.internal", port: 6432 } }).success).toBe(false);
  });

  it("defaults to require for a remote host and to disable on loopback; keeps an explicit mode", () => {
    expect(server({ host: "pg.example.com" })?.sslmode).toBe("require");
    expect(server({})?.sslmode).toBe("disable");
    expect(server({ host: "localhost" })?.sslmode).toBe("disable");
    expect(server({ host: "::1", sslmode: "prefer" })?.sslmode).toBe("prefer");
    expect(
      server({ host: "pg.example.com", sslmode: "verify-full", caCert: "-----BEGIN CERTIFICATE-----" }),
    ).toMatchObject({ sslmode: "verify-full", caCert: "-----BEGIN CERTIFICATE-----" });
    expect(server({ pooler: { host: "127.0.0.1", port: 6432 } })?.pooler).toEqual({
      host: "127.0.0.1",
      port: 6432,
      pgbouncer: true,
    });
  });
});
