import { describe, expect, it } from "vitest";
import {
  CreateDatabaseBody,
  CreatedProject,
  databaseIdPattern,
  Limit,
  Name,
  newId,
  projectIdPattern,
  RestoreBody,
  UpdateDatabaseBody,
} from "./index.ts";

describe("ids", () => {
  it("generates cuid-like ids that match the seed's patterns", () => {
    const project = newId("project");
    const database = newId("database");
    expect(project).toMatch(/^proj_c[a-z0-9]{24}$/);
    expect(project).toMatch(projectIdPattern);
    expect(database).toMatch(databaseIdPattern);
    expect(new Set(Array.from({ length: 1000 }, () => newId("database"))).size).toBe(1000);
  });
});

describe("request bodies", () => {
  it("rejects unknown fields and names them", () => {
    const result = CreateDatabaseBody.safeParse({ projectId: newId("project"), nmae: "typo" });
    expect(result.success).toBe(false);
    expect(JSON.stringify(result.error?.issues)).toContain("nmae");
  });

  it("trims names and refuses empty, long and control-character names", () => {
    expect(Name.parse("  orders ")).toBe("orders");
    for (const bad of ["", "   ", "x".repeat(65), "a\u0007b"]) expect(Name.safeParse(bad).success).toBe(false);
  });

  it("accepts only isDefault: true in updates, and an empty object", () => {
    expect(UpdateDatabaseBody.safeParse({}).success).toBe(true);
    expect(UpdateDatabaseBody.safeParse({ isDefault: false }).success).toBe(false);
  });

  it("requires a backup source on restore", () => {
    expect(RestoreBody.safeParse({ source: { type: "empty" } }).success).toBe(false);
    expect(RestoreBody.safeParse({ source: { type: "database", databaseId: newId("database") } }).success).toBe(false);
  });

  it("accepts the public API's clone source and branch fields, with its rules on combining them (PUBLIC-API.md)", () => {
    const projectId = newId("project");
    const branchId = newId("branch");
    expect(branchId).toMatch(/^br_c[a-z0-9]{24}$/);
    expect(
      CreateDatabaseBody.safeParse({ projectId, source: { type: "database", databaseId: newId("database") } }).success,
    ).toBe(true);
    for (const ok of [{ branchId }, { branchGitName: "feature/x" }, { branchId, logicalId: "app/db" }])
      expect(CreateDatabaseBody.safeParse({ projectId, ...ok }).success).toBe(true);
    for (const ok of [{ branchId }, { branchGitName: "main" }, { logicalId: "app/orders" }])
      expect(UpdateDatabaseBody.safeParse(ok).success).toBe(true);
    // Every database is on a branch (null refused); one way to name it; logicalId is scoped by the branch.
    for (const bad of [
      { branchId: null },
      { branchGitName: null },
      { branchId, branchGitName: "main" },
      { branchGitName: "a b" },
      { branchGitName: "main", logicalId: "x" },
    ]) {
      expect(CreateDatabaseBody.safeParse({ projectId, ...bad }).success).toBe(false);
      expect(UpdateDatabaseBody.safeParse(bad).success).toBe(false);
    }
    expect(UpdateDatabaseBody.safeParse({ branchId, logicalId: "x" }).success).toBe(false);
  });

  it("parses limit strictly: 1..100 integers only", () => {
    expect(Limit.parse("1")).toBe(1);
    expect(Limit.parse("100")).toBe(100);
    for (const bad of ["0", "101", "abc", "1.5", "-1", ""]) expect(Limit.safeParse(bad).success).toBe(false);
  });
});

describe("responses", () => {
  it("accept unknown extra fields but require the seed's fields", () => {
    const project = {
      id: newId("project"),
      type: "project",
      url: "http://localhost/v1/projects/x",
      name: "p",
      createdAt: "2026-11-21T08:00:00.000Z",
      defaultRegion: "us-east-1",
      workspace: { id: newId("workspace"), url: "http://localhost/v1/workspaces/x", name: "default" },
      database: null,
      somethingNew: 1,
    };
    expect(CreatedProject.safeParse(project).success).toBe(true);
    const { name: _name, ...missing } = project;
    expect(CreatedProject.safeParse(missing).success).toBe(false);
  });
});
