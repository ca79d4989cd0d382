import type { operations } from "@prisma/management-api-sdk";
import { describe, expect, expectTypeOf, it } from "vitest";
import type { z } from "zod";
import {
  PublicBackup,
  PublicConnection,
  PublicConnectionRead,
  PublicCreatedConnection,
  PublicCreatedDatabase,
  PublicCreatedProject,
  PublicDatabase,
  PublicDatabaseWithCredentials,
  PublicErrorBody,
  PublicProject,
} from "./public-responses.ts";
import {
  Backup,
  ConnectionWithSessions,
  CreatedConnection,
  CreatedDatabase,
  CreatedProject,
  Database,
  Project,
} from "./resources.ts";

// The client's schemas against the truth about the public API, the SDK's OpenAPI types: every response shape those
// types allow must be one the client reads (checked by the compiler: `npm run typecheck`), and every shape our own
// service sends (the strict schemas of src/contract/) too.

type Json<Op extends keyof operations, Status extends number> =
  operations[Op]["responses"] extends Record<Status, { content: { "application/json": infer T } }> ? T : never;
type Data<Op extends keyof operations, Status extends number> = Json<Op, Status> extends { data: infer T } ? T : never;
type Item<Op extends keyof operations> = Data<Op, 200> extends (infer T)[] ? T : never;

describe("the client's schemas accept every response the public API's SDK types allow", () => {
  it("databases, connections, projects, backups, error bodies", () => {
    expectTypeOf<Data<"getV1DatabasesByDatabaseId", 200>>().toExtend<z.input<typeof PublicDatabase>>();
    expectTypeOf<Item<"getV1Databases">>().toExtend<z.input<typeof PublicDatabase>>();
    expectTypeOf<Data<"postV1Databases", 201>>().toExtend<z.input<typeof PublicDatabaseWithCredentials>>();
    expectTypeOf<Data<"postV1ProjectsByProjectIdDatabases", 201>>().toExtend<z.input<typeof PublicCreatedDatabase>>();
    expectTypeOf<Data<"postV1DatabasesByDatabaseIdConnections", 200>>().toExtend<
      z.input<typeof PublicCreatedConnection>
    >();
    expectTypeOf<Item<"getV1DatabasesByDatabaseIdConnections">>().toExtend<z.input<typeof PublicConnection>>();
    expectTypeOf<Data<"getV1ConnectionsById", 200>>().toExtend<z.input<typeof PublicConnectionRead>>();
    expectTypeOf<Data<"getV1ProjectsById", 200>>().toExtend<z.input<typeof PublicProject>>();
    expectTypeOf<Item<"getV1Projects">>().toExtend<z.input<typeof PublicProject>>();
    expectTypeOf<Data<"postV1Projects", 201>>().toExtend<z.input<typeof PublicCreatedProject>>();
    expectTypeOf<Item<"getV1DatabasesByDatabaseIdBackups">>().toExtend<z.input<typeof PublicBackup>>();
    expectTypeOf<Json<"getV1DatabasesByDatabaseId", 404>>().toExtend<z.input<typeof PublicErrorBody>>();
  });

  it("and every response our own service sends", () => {
    expectTypeOf<z.output<typeof Database>>().toExtend<z.input<typeof PublicDatabase>>();
    expectTypeOf<z.output<typeof CreatedDatabase>>().toExtend<z.input<typeof PublicCreatedDatabase>>();
    expectTypeOf<z.output<typeof CreatedConnection>>().toExtend<z.input<typeof PublicCreatedConnection>>();
    expectTypeOf<z.output<typeof ConnectionWithSessions>>().toExtend<z.input<typeof PublicConnectionRead>>();
    expectTypeOf<z.output<typeof Project>>().toExtend<z.input<typeof PublicProject>>();
    expectTypeOf<z.output<typeof CreatedProject>>().toExtend<z.input<typeof PublicCreatedProject>>();
    expectTypeOf<z.output<typeof Backup>>().toExtend<z.input<typeof PublicBackup>>();
  });

  it("reads openSessions, our extension, leniently: absent or unreadable is 'cannot tell'", () => {
    const connection = {
      id: "con_cabcdefghijklmnopqrstuvwx",
      type: "connection",
      url: "https://api.example/v1/connections/con_cabcdefghijklmnopqrstuvwx",
      name: "app",
      createdAt: "2026-01-01T00:00:00Z",
      kind: "postgres",
      endpoints: { direct: { host: "db.example", port: 5432 } },
      directConnection: null,
      database: { id: "db_cabcdefghijklmnopqrstuvwx", url: "https://api.example/v1/databases/d", name: "d" },
    };
    expect(PublicConnectionRead.parse({ ...connection, openSessions: 2 }).openSessions).toBe(2);
    expect(PublicConnectionRead.parse(connection).openSessions).toBeUndefined();
    for (const unreadable of [-1, 1.5, "2", null, { clients: 2 }])
      expect(PublicConnectionRead.parse({ ...connection, openSessions: unreadable }).openSessions).toBeUndefined();
  });

  it("reads a clone of the public API at run time", () => {
    const clone = {
      id: "db_cabcdefghijklmnopqrstuvwx",
      type: "database",
      url: "https://api.example/v1/databases/db_cabcdefghijklmnopqrstuvwx",
      name: "copy",
      status: "ready",
      createdAt: "2026-01-01T00:00:00+00:00",
      isDefault: false,
      defaultConnectionId: null,
      connections: [],
      project: { id: "proj_cabcdefghijklmnopqrstuvwx", url: "https://api.example/v1/projects/p", name: "p" },
      region: null,
      source: { type: "database", databaseId: "db_cabcdefghijklmnopqrstuvwy" },
      branchId: null,
      logicalId: null,
    };
    expect(PublicDatabase.safeParse(clone).success).toBe(true);
    expect(Database.safeParse(clone).success).toBe(false);
  });
});

it("tests real SDK types (a lookup that went wrong would be never, which extends anything)", () => {
  expectTypeOf<Data<"getV1DatabasesByDatabaseId", 200>>().not.toBeNever();
  expectTypeOf<Item<"getV1Databases">>().not.toBeNever();
  expectTypeOf<Data<"postV1Databases", 201>>().not.toBeNever();
  expectTypeOf<Data<"postV1ProjectsByProjectIdDatabases", 201>>().not.toBeNever();
  expectTypeOf<Data<"postV1DatabasesByDatabaseIdConnections", 200>>().not.toBeNever();
  expectTypeOf<Item<"getV1DatabasesByDatabaseIdConnections">>().not.toBeNever();
  expectTypeOf<Data<"getV1ConnectionsById", 200>>().not.toBeNever();
  expectTypeOf<Data<"getV1ProjectsById", 200>>().not.toBeNever();
  expectTypeOf<Item<"getV1Projects">>().not.toBeNever();
  expectTypeOf<Data<"postV1Projects", 201>>().not.toBeNever();
  expectTypeOf<Item<"getV1DatabasesByDatabaseIdBackups">>().not.toBeNever();
  expectTypeOf<Json<"getV1DatabasesByDatabaseId", 404>>().not.toBeNever();
});
