import { describe, expect, it } from "vitest";
import { describeIssues, ServiceConfig } from "../config/config.ts";
import { chooseServer } from "./servers.ts";

const admin = (port: number) => `postgresql://postgres:s3cret@127.0.0.1:${port}/postgres`;
const parse = (region: unknown) =>
  ServiceConfig.safeParse({
    controlUrl: "postgresql://x@127.0.0.1/c",
    baseUrl: "http://127.0.0.1",
    encryptionKey: Buffer.alloc(32),
    backupDir: "/tmp/b",
    regions: { "us-east-1": region },
  });
const issues = (region: unknown) => {
  const result = parse(region);
  expect(result.success).toBe(false);
  return result.error!.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
};

describe("regions file: one server or several", () => {
  it("reads the one-server shape as one server named default, region settings kept on the region", () => {
    const region = parse({ adminUrl: admin(5432), loginConnectionLimit: 5, pooler: { host: "127.0.0.1", port: 6432 } })
      .data!.regions["us-east-1"]!;
    expect(region.loginConnectionLimit).toBe(5);
    expect(region.servers).toEqual([
      {
        name: "default",
        adminUrl: admin(5432),
        draining: false,
        sslmode: "disable",
        pooler: { host: "127.0.0.1", port: 6432, pgbouncer: true },
      },
    ]);
  });

  it("reads a servers list with capacities and draining, in the file's order", () => {
    const region = parse({
      databaseConnectionLimit: 7,
      servers: [
        { name: "a", adminUrl: admin(5432), maxDatabases: 10 },
        { name: "b", adminUrl: admin(5433), draining: true, host: "pg-b.example.com" },
      ],
    }).data!.regions["us-east-1"]!;
    expect(region.databaseConnectionLimit).toBe(7);
    expect(region.servers.map((s) => [s.name, s.maxDatabases, s.draining, s.sslmode])).toEqual([
      ["a", 10, false, "disable"],
      ["b", undefined, true, "require"],
    ]);
  });

  it("says precisely what is wrong, by path, without echoing an admin URL (it holds a password)", () => {
    expect(issues({ adminUrl: "s3cret-not-a-url" })).toEqual([
      "regions.us-east-1.adminUrl: adminUrl must be a postgresql://user:password@host:port/database URL (its text is not shown: it holds a password)",
    ]);
    expect(issues({ servers: [] })).toEqual(["regions.us-east-1.servers: a region needs at least one server"]);
    expect(
      issues({
        servers: [
          { name: "a", adminUrl: admin(1) },
          { name: "a", adminUrl: admin(2) },
        ],
      }),
    ).toEqual(['regions.us-east-1.servers.1.name: server name "a" is used twice in this region (also servers.0)']);
    expect(
      issues({
        servers: [
          { name: "a", adminUrl: admin(1) },
          { name: "b", adminUrl: admin(1) },
        ],
      }),
    ).toEqual([
      'regions.us-east-1.servers.1.adminUrl: servers "a" and "b" are the same server (same adminUrl host and port)',
    ]);
    expect(issues({ servers: [{ name: "Bad_Name", adminUrl: admin(1), maxDatabases: 0 }] })).toEqual([
      "regions.us-east-1.servers.0.name: a server name is 1 to 63 lowercase letters, digits and dashes, starting and ending with a letter or digit",
      "regions.us-east-1.servers.0.maxDatabases: maxDatabases must be at least 1 (to stop new databases on a server, set draining: true)",
    ]);
    expect(issues({ servers: [{ name: "a", adminUrl: admin(1), colour: "red" }] })).toEqual([
      'regions.us-east-1.servers.0: Unrecognized key: "colour"',
    ]);
    // Region settings belong to the region, not to a server of the list.
    expect(issues({ servers: [{ name: "a", adminUrl: admin(1), loginConnectionLimit: 3 }] })).toEqual([
      'regions.us-east-1.servers.0: Unrecognized key: "loginConnectionLimit"',
    ]);
    expect(
      issues({
        servers: [{ name: "a", adminUrl: "postgresql://u:pw@pg.example.com/postgres", sslmode: "disable" }],
      })[0],
    ).toMatch(/^regions\.us-east-1\.servers\.0\.sslmode: sslmode "disable" lets passwords cross the network in clear/);
    for (const text of [
      issues({ adminUrl: "postgresql://u:s3cret@[bad/x" }),
      issues({ servers: [{ name: "a", adminUrl: "s3cret" }] }),
    ])
      expect(text.join()).not.toMatch(/s3cret/);
  });
});

describe("placement: the server with the most room", () => {
  const counts = (entries: Record<string, number>) => new Map(Object.entries(entries));
  const s = (name: string, maxDatabases?: number, draining = false) => ({
    name,
    draining,
    ...(maxDatabases !== undefined ? { maxDatabases } : {}),
  });

  it("takes the most room; ties go to fewer databases, then to the file's order", () => {
    expect(chooseServer([s("a", 10), s("b", 20)], counts({ a: 0, b: 15 }))?.name).toBe("a");
    expect(chooseServer([s("a", 10), s("b", 20)], counts({ a: 5, b: 10 }))?.name).toBe("b");
    expect(chooseServer([s("a", 10), s("b", 10)], counts({}))?.name).toBe("a");
    expect(chooseServer([s("a"), s("b")], counts({ a: 3, b: 2 }))?.name).toBe("b");
    expect(chooseServer([s("a"), s("b")], counts({ a: 2, b: 2 }))?.name).toBe("a");
    // An unbounded server has endless room.
    expect(chooseServer([s("a", 1000), s("b")], counts({ a: 0, b: 500 }))?.name).toBe("b");
  });

  it("never picks a draining or full server; none left is undefined", () => {
    expect(chooseServer([s("a", undefined, true), s("b", 5)], counts({ b: 4 }))?.name).toBe("b");
    expect(chooseServer([s("a", 2), s("b", 5)], counts({ a: 2, b: 5 }))).toBeUndefined();
    expect(chooseServer([s("a", undefined, true)], counts({}))).toBeUndefined();
  });
});

describe("config errors as one line", () => {
  it("names the path and, for a key that is not a region, the regions there are", () => {
    const result = ServiceConfig.safeParse({
      controlUrl: "c",
      baseUrl: "http://127.0.0.1",
      encryptionKey: Buffer.alloc(32),
      backupDir: "/b",
      regions: { "us-east1": { adminUrl: admin(1) } },
    });
    expect(describeIssues(result.error!.issues)).toMatch(
      /^regions: Unrecognized key: "us-east1" \(regions: us-east-1, us-west-1, eu-west-3, eu-central-1, ap-northeast-1, ap-southeast-1\)/,
    );
    expect(describeIssues(parse({ servers: [{ name: "a" }] }).error!.issues)).toBe(
      "regions.us-east-1.servers.0.adminUrl: Invalid input: expected string, received undefined",
    );
  });
});
