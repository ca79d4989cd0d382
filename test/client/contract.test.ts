import { inspect } from "node:util";
import pg from "pg";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ConflictError,
  createClient,
  ForbiddenError,
  InvalidRequestError,
  MdsApiError,
  NotFoundError,
  UnauthorizedError,
  UnprocessableError,
  type MdsClient,
} from "../../src/client/index.ts";
import { newId, type PublicDatabase as Database } from "../../src/contract/index.ts";
import type { MdsApi } from "../../src/resources/remote/remote-api.ts";
import { listServiceTokens } from "../../src/service/domain/tokens.ts";
import { startTestService, type TestService } from "../support/test-service.ts";
import { eventually } from "../support/eventually.ts";
import { scanText } from "../support/secret-scan.ts";

// The shared contract suite: every client method against the real service (real PostgreSQL
// behind it), page walks, and a typed error for every error row (docs/decisions.md#errors) a client can provoke.
// 405 (no method sends a wrong verb) and 413 (bodies are checked before sending) cannot be
// provoked through the client; 422 region_unavailable cannot either, because the test service
// serves all six regions; 429 is in contract-rate-limit.test.ts. Those codes, 500 and 503 are
// also covered against a misbehaving server in misbehaving-server.test.ts.

// The operator codes against MdsApi; the client must satisfy it.
export const satisfiesOperatorApi = (client: MdsClient): MdsApi => client;

const observed: string[] = [];

async function failure(promise: Promise<unknown>): Promise<MdsApiError> {
  try {
    await promise;
  } catch (error) {
    observed.push(inspect(error, { depth: 6 }));
    if (error instanceof MdsApiError) return error;
    throw new Error(`expected an MdsApiError, got ${inspect(error)}`);
  }
  throw new Error("expected the call to fail");
}

describe("client against the real service", () => {
  let service: TestService;
  let client: MdsClient;
  const secrets: string[] = [];

  beforeAll(async () => {
    service = await startTestService();
    secrets.push(service.token);
    client = createClient({
      baseUrl: service.url,
      token: service.token,
      logger: {
        debug: (o, m) => observed.push(JSON.stringify({ ...o, m })),
        warn: (o, m) => observed.push(JSON.stringify({ ...o, m })),
      },
    });
  });

  afterAll(async () => {
    await service?.stop();
    expect(
      scanText(
        observed.join("\n"),
        secrets.map((value, i) => ({ name: `token ${i}`, value })),
        "client errors and logs",
      ),
    ).toEqual([]);
  });

  const ready = (id: string) =>
    eventually(
      async () => {
        const db = await client.getDatabase(id);
        if (db.status !== "ready") throw new Error(`status ${db.status}`);
        return db;
      },
      { what: `database ${id} ready`, timeoutMs: 60_000 },
    );

  describe("projects", () => {
    it("creates, gets, lists by logicalId, refuses a duplicate key naming the holder, deletes", async () => {
      const logicalId = `k8s:test:ns/${newId("project")}`;
      const created = await client.createProject({ name: "shop", logicalId, createDatabase: false });
      expect(created).toMatchObject({ type: "project", name: "shop", database: null });

      const fetched = await client.getProject(created.id);
      expect(fetched.id).toBe(created.id);
      expect("database" in fetched).toBe(false);

      const page = await client.listProjects({ logicalId });
      expect(page.data.map((p) => p.id)).toEqual([created.id]);
      expect(page.pagination).toEqual({ hasMore: false, nextCursor: null });

      const duplicate = await failure(client.createProject({ name: "other", logicalId, createDatabase: false }));
      expect(duplicate).toBeInstanceOf(ConflictError);
      expect(duplicate).toMatchObject({ status: 409, code: "conflict", existingId: created.id });

      await client.deleteProject(created.id);
      expect(await failure(client.getProject(created.id))).toBeInstanceOf(NotFoundError);
    });

    it("creates a project with its default database in creation form", async () => {
      const created = await client.createProject({ name: "with-db" });
      const db = created.database;
      expect(db).not.toBeNull();
      expect(db?.isDefault).toBe(true);
      expect(db?.connectionString).toMatch(/^postgresql:\/\//);
      expect(db?.apiKeys?.length).toBeGreaterThan(0);
      secrets.push(db?.directConnection?.pass ?? "");
      // Deleting a project that still has databases is a conflict.
      const conflict = await failure(client.deleteProject(created.id));
      expect(conflict).toBeInstanceOf(ConflictError);
      expect(conflict.message).toMatch(new RegExp(`^cannot delete project "${created.id}": conflict: `));
    });

    it("replays a POST with the same Idempotency-Key, and refuses the key with another body", async () => {
      const key = `test-${newId("project")}`;
      const first = await client.createProject({ name: "once", createDatabase: false }, { idempotencyKey: key });
      const again = await client.createProject({ name: "once", createDatabase: false }, { idempotencyKey: key });
      expect(again.id).toBe(first.id);
      const mismatch = await failure(
        client.createProject({ name: "twice", createDatabase: false }, { idempotencyKey: key }),
      );
      expect(mismatch).toBeInstanceOf(UnprocessableError);
      expect(mismatch.status).toBe(422);
      // The service announces that it replays, so the client may re-send a POST whose answer was lost.
      expect(client.replaysIdempotencyKeys()).toBe(true);
      const unknown = await request(`${service.url}/v1/no-such-route`);
      await unknown.body.dump();
      expect(unknown.headers["x-idempotency-replay"]).toBe("86400");
    });

    it("walks every project page by page", async () => {
      const mine = new Set<string>();
      for (let i = 0; i < 3; i++)
        mine.add((await client.createProject({ name: `walk-${i}`, createDatabase: false })).id);
      const walked: string[] = [];
      for await (const project of client.iterateProjects({ limit: 1 })) walked.push(project.id);
      expect(new Set(walked).size).toBe(walked.length);
      for (const id of mine) expect(walked).toContain(id);
    });
  });

  describe("databases", () => {
    let projectId: string;
    let defaultDb: string;

    beforeAll(async () => {
      const project = await client.createProject({ name: "dbs" });
      projectId = project.id;
      defaultDb = project.database?.id ?? "";
    });

    it("creates through both endpoints, in their creation forms", async () => {
      const viaBody = await client.createDatabase({ projectId, name: "via-body", logicalId: "k8s:test:ns/via-body" });
      expect(viaBody).toMatchObject({
        type: "database",
        name: "via-body",
        isDefault: false,
        project: { id: projectId },
      });
      expect(viaBody.connections[0]?.endpoints.direct?.connectionString).toMatch(/^postgresql:\/\//);

      const viaPath = await client.createProjectDatabase(projectId, { name: "via-path", region: "inherit" });
      expect(viaPath.status).toBe("provisioning");
      expect(viaPath.connectionString).toMatch(/^postgresql:\/\//);
      secrets.push(viaPath.directConnection?.pass ?? "");

      const duplicate = await failure(
        client.createProjectDatabase(projectId, { name: "again", logicalId: "k8s:test:ns/via-body" }),
      );
      expect(duplicate).toBeInstanceOf(ConflictError);
      expect(duplicate).toMatchObject({ existingId: viaBody.id });

      await ready(viaPath.id);
      const got = await client.getDatabase(viaPath.id);
      expect(got.connections.every((c) => c.directConnection?.pass === "********")).toBe(true);
      expect(JSON.stringify(got)).not.toContain("postgresql://");
    });

    it("updates name and the default flag", async () => {
      const db = await client.createProjectDatabase(projectId, { name: "to-rename" });
      const renamed = await client.updateDatabase(db.id, { name: "renamed" });
      expect(renamed.name).toBe("renamed");
      const promoted = await client.updateDatabase(db.id, { isDefault: true });
      expect(promoted.isDefault).toBe(true);
      expect((await client.getDatabase(defaultDb)).isDefault).toBe(false);
      defaultDb = db.id;
      expect((await client.updateDatabase(db.id, {})).name).toBe("renamed");
    });

    it("lists and walks a project's databases, filters by logicalId", async () => {
      const all: Database[] = [];
      for await (const db of client.iterateDatabases({ projectId, limit: 1 })) all.push(db);
      expect(all.length).toBeGreaterThanOrEqual(4);
      expect(new Set(all.map((d) => d.id)).size).toBe(all.length);
      expect(all.every((d) => d.project.id === projectId)).toBe(true);

      const nested: string[] = [];
      for await (const db of client.iterateProjectDatabases(projectId, { limit: 2 })) nested.push(db.id);
      expect(nested).toEqual(all.map((d) => d.id));

      const first = await client.listProjectDatabases(projectId, { limit: 1 });
      expect(first.pagination.hasMore).toBe(true);
      expect(typeof first.pagination.nextCursor).toBe("string");

      const byKey = await client.listDatabases({ logicalId: "k8s:test:ns/via-body" });
      expect(byKey.data.map((d) => d.name)).toEqual(["via-body"]);

      // A foreign or unknown project narrows to an empty page, not an error.
      expect((await client.listDatabases({ projectId: newId("project") })).data).toEqual([]);
    });

    it("takes a backup, restores from it, and refuses an unusable backup", async () => {
      const source = await client.createProjectDatabase(projectId, { name: "backed-up" });
      await ready(source.id);
      const backup = await client.createBackup(source.id);
      expect(backup).toMatchObject({ type: "backup", backupType: "full" });
      await eventually(
        async () => {
          const list = await client.listBackups(source.id, { limit: 10 });
          const found = list.data.find((b) => b.id === backup.id);
          if (found?.status !== "completed") throw new Error(`backup ${found?.status}`);
          expect(list.meta.backupRetentionDays).toBeGreaterThan(0);
        },
        { what: "backup completed", timeoutMs: 60_000 },
      );

      const target = await client.createProjectDatabase(projectId, { name: "target" });
      await ready(target.id);
      const wrongSource = await failure(
        client.restoreDatabase(target.id, { source: { type: "backup", databaseId: target.id, backupId: backup.id } }),
      );
      // Another database's backup answers as a backup that does not exist (no existence oracle).
      expect(wrongSource).toBeInstanceOf(NotFoundError);
      expect(wrongSource.code).toBe("not_found");

      const restoring = await client.restoreDatabase(target.id, {
        source: { type: "backup", databaseId: source.id, backupId: backup.id },
      });
      expect(restoring.source).toEqual({ type: "backup", databaseId: source.id, backupId: backup.id });
      await ready(target.id);
    });

    it("mints, lists and revokes connections", async () => {
      const created = await client.createConnection(defaultDb, { name: "ci" });
      secrets.push(created.directConnection?.pass ?? "");
      expect(created.endpoints.direct?.connectionString).toMatch(/^postgresql:\/\//);
      const listed = await client.listConnections(defaultDb);
      expect(listed.data.map((c) => c.id)).toContain(created.id);
      await client.deleteConnection(created.id);
      expect((await client.listConnections(defaultDb)).data.map((c) => c.id)).not.toContain(created.id);
    });

    it("deletes a database", async () => {
      const db = await client.createProjectDatabase(projectId, { name: "short-lived" });
      await ready(db.id);
      await client.deleteDatabase(db.id);
      expect(await failure(client.getDatabase(db.id))).toBeInstanceOf(NotFoundError);
    });
  });

  describe("OAuth", () => {
    // A refresh token from the service's client_credentials grant (client_id = the service token's id).
    async function firstRefreshToken(workspace: string): Promise<{ clientId: string; refreshToken: string }> {
      const token = await service.createToken(workspace);
      secrets.push(token);
      const pool = new pg.Pool({ connectionString: service.controlUrl, max: 1 });
      const [info] = await listServiceTokens(pool, workspace);
      await pool.end();
      const clientId = info?.id ?? "";
      const response = await request(`${service.url}/oauth/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({
          grant_type: "client_credentials",
          client_id: clientId,
          client_secret: token,
        }).toString(),
      });
      const body = (await response.body.json()) as { refresh_token: string; access_token: string };
      secrets.push(body.refresh_token, body.access_token);
      return { clientId, refreshToken: body.refresh_token };
    }

    it("refreshes against the service, rotates the refresh token, and reports a spent one as unauthorized", async () => {
      const workspace = `oauth-${Date.now()}`;
      const { clientId, refreshToken } = await firstRefreshToken(workspace);
      const rotated: string[] = [];
      const oauthClient = createClient({
        baseUrl: service.url,
        oauth: {
          tokenUrl: `${service.url}/oauth/token`,
          clientId,
          refreshToken,
          onRefreshToken: (t) => void rotated.push(t),
        },
      });
      const project = await oauthClient.createProject({ name: "via-oauth", createDatabase: false });
      expect((await oauthClient.listProjects()).data.map((p) => p.id)).toEqual([project.id]);
      expect(rotated).toHaveLength(1);
      expect(rotated[0]).not.toBe(refreshToken);
      secrets.push(...rotated);

      // The first refresh token is spent: presenting it again revokes the chain.
      const replay = createClient({
        baseUrl: service.url,
        oauth: { tokenUrl: `${service.url}/oauth/token`, clientId, refreshToken, onRefreshToken: () => undefined },
      });
      const error = await failure(replay.listProjects());
      expect(error).toBeInstanceOf(UnauthorizedError);
      expect(error.message).toMatch(
        /^cannot refresh the access token: unauthorized: unauthorized: refresh token already used/,
      );
    });
  });

  describe("typed errors", () => {
    it("400 invalid_request: a bad cursor, a bad path id", async () => {
      const cursor = await failure(client.listDatabases({ cursor: "not-a-cursor" }));
      expect(cursor).toBeInstanceOf(InvalidRequestError);
      expect(cursor).toMatchObject({ status: 400, code: "invalid_request" });
      const badId = await failure(client.getDatabase("not a valid id!"));
      expect(badId).toBeInstanceOf(InvalidRequestError);
      expect(badId.hint).toBeTruthy();
    });

    it("401 unauthorized: an unknown token", async () => {
      const stranger = createClient({ baseUrl: service.url, token: `mds_unknown_${newId("workspace")}` });
      const error = await failure(stranger.listDatabases());
      expect(error).toBeInstanceOf(UnauthorizedError);
      expect(error.status).toBe(401);
    });

    it("403 forbidden: a token without the required scopes", async () => {
      const token = await service.createToken(`ws-${Date.now()}`, ["workspace:admin"]);
      secrets.push(token);
      const limited = createClient({ baseUrl: service.url, token });
      const error = await failure(limited.getDatabase(newId("database")));
      expect(error).toBeInstanceOf(ForbiddenError);
      expect(error.status).toBe(403);
    });

    it("404 not_found: unknown ids, and another workspace's resources", async () => {
      const missing = newId("database");
      const error = await failure(client.getDatabase(missing));
      expect(error).toBeInstanceOf(NotFoundError);
      expect(error.message).toMatch(new RegExp(`^cannot get database "${missing}": not_found: `));
      expect(error.requestId).toBeTruthy();

      const project = await client.createProject({ name: "private", createDatabase: false });
      const token = await service.createToken(`other-${Date.now()}`);
      secrets.push(token);
      const other = createClient({ baseUrl: service.url, token });
      expect(await failure(other.getProject(project.id))).toBeInstanceOf(NotFoundError);
      expect(await failure(other.createProjectDatabase(project.id, { name: "intruder" }))).toBeInstanceOf(
        NotFoundError,
      );
    });
  });
});
