import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  findPgBouncer,
  grantPoolerConnect,
  startPgBouncer,
  startPostgres,
  templateCluster,
  type RunningPgBouncer,
  type RunningPostgres,
} from "./index.ts";
import { PostgresNotFoundError } from "./errors.ts";
import { pooledUseOf } from "./pgbouncer.ts";
import { eventually } from "../../test/support/eventually.ts";

const run = promisify(execFile);

describe("pgbouncer in front of a TLS PostgreSQL", () => {
  let dir: string;
  let postgres: RunningPostgres;
  let bouncer: RunningPgBouncer;
  const password = "tenant-password-1";

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "mds-pgb-"));
    postgres = await startPostgres({
      dir: path.join(dir, "pg"),
      template: await templateCluster(),
      tls: true,
      settings: { fsync: "off" },
    });
    const admin = new pg.Client({ connectionString: postgres.url });
    await admin.connect();
    await admin.query("CREATE ROLE mds_t1_owner NOLOGIN");
    await admin.query(`CREATE ROLE mds_t1_login LOGIN PASSWORD '${password}' IN ROLE mds_t1_owner`);
    await admin.query("CREATE DATABASE mds_t1 OWNER mds_t1_owner");
    await admin.query("REVOKE ALL ON DATABASE mds_t1 FROM PUBLIC");
    await admin.end();
    bouncer = await startPgBouncer({
      dir: path.join(dir, "pgbouncer"),
      server: { host: postgres.host, port: postgres.port, adminUrl: postgres.url },
      tls: postgres.tls!,
      poolSize: 3,
    });
  }, 60_000);

  afterAll(async () => {
    await bouncer?.stop();
    await postgres?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it("names the package when pgbouncer is missing, and finds Debian's /usr/sbin/pgbouncer off PATH", async () => {
    const err = await findPgBouncer("/nonexistent", ["/nonexistent/pgbouncer"]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PostgresNotFoundError);
    expect((err as Error).message).toMatch(/cannot find pgbouncer.*apt-get install pgbouncer/);
    expect((await findPgBouncer("/nonexistent")).version).toMatch(/^\d+\.\d+/);
  });

  it("keeps keys and the auth file private", async () => {
    expect((await stat(postgres.tls!.keyFile)).mode & 0o777).toBe(0o600);
    expect((await stat(path.join(dir, "pg", "tls", "ca.key"))).mode & 0o777).toBe(0o600);
    expect((await stat(path.join(dir, "pgbouncer", "auth_file.txt"))).mode & 0o777).toBe(0o600);
  });

  it("serves a tenant login over verified TLS, and the lookup answers nobody else", async () => {
    const client = new pg.Client({
      host: bouncer.host,
      port: bouncer.port,
      user: "mds_t1_login",
      password,
      database: "mds_t1",
      ssl: { ca: postgres.tls!.caCert },
    });
    await client.connect();
    const { rows } = await client.query<{ ssl: boolean; u: string }>(
      "SELECT ssl, current_user AS u FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) WHERE pid = pg_backend_pid()",
    );
    expect(rows[0]!.ssl).toBe(true);
    // the tenant calls the lookup itself: nothing
    const lookup = await client.query("SELECT * FROM pg_catalog.mds_pooler_lookup('mds_t1_login')");
    expect(lookup.rowCount).toBe(0);
    await client.end();
  });

  it("refuses a plain connection and a wrong password", async () => {
    const plain = new pg.Client({
      host: bouncer.host,
      port: bouncer.port,
      user: "mds_t1_login",
      password,
      database: "mds_t1",
      ssl: false,
    });
    await expect(plain.connect()).rejects.toThrow();
    const wrong = new pg.Client({
      host: bouncer.host,
      port: bouncer.port,
      user: "mds_t1_login",
      password: "nope",
      database: "mds_t1",
      ssl: { ca: postgres.tls!.caCert },
    });
    await expect(wrong.connect()).rejects.toThrow();
  });

  it("psql verifies the server with verify-full through both endpoints", async () => {
    for (const port of [postgres.port, bouncer.port]) {
      const { stdout } = await run(
        "psql",
        ["-XAtc", "SELECT 1", `host=127.0.0.1 port=${port} user=mds_t1_login dbname=mds_t1 sslmode=verify-full`],
        {
          env: { ...process.env, PGPASSWORD: password, PGSSLROOTCERT: postgres.tls!.caFile },
        },
      );
      expect(stdout.trim()).toBe("1");
    }
  });

  it("grantPoolerConnect opens a new database to the lookup", async () => {
    const admin = new pg.Client({ connectionString: postgres.url });
    await admin.connect();
    await admin.query("CREATE ROLE mds_t2_owner NOLOGIN");
    await admin.query(`CREATE ROLE mds_t2_login LOGIN PASSWORD '${password}' IN ROLE mds_t2_owner`);
    await admin.query("CREATE DATABASE mds_t2 OWNER mds_t2_owner");
    await admin.query("REVOKE ALL ON DATABASE mds_t2 FROM PUBLIC");
    const connect = () => {
      const c = new pg.Client({
        host: bouncer.host,
        port: bouncer.port,
        user: "mds_t2_login",
        password,
        database: "mds_t2",
        ssl: { ca: postgres.tls!.caCert },
      });
      return c.connect().then(() => c.end());
    };
    await grantPoolerConnect(admin, "mds_t2");
    await admin.end();
    await connect();
  });

  // Last: it kills the PgBouncer.
  it("pooledUseOf: a login's clients and the backends PgBouncer holds for it; one that is gone holds none", async () => {
    const server = new pg.Pool({ connectionString: postgres.url, max: 1 });
    const client = new pg.Client({
      host: bouncer.host,
      port: bouncer.port,
      user: "mds_t1_login",
      password,
      database: "mds_t1",
      ssl: { ca: postgres.tls!.caCert },
    });
    try {
      await client.connect();
      await client.query("SELECT 1");
      const backends = async () =>
        (
          await server.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE usename = 'mds_t1_login'")
        ).rows.map((r) => r.pid);
      const using = await pooledUseOf(server, "mds_t1_login");
      expect(using?.clients).toBe(1);
      expect([...using!.serverPids]).toEqual(await backends());
      expect((await pooledUseOf(server, "mds_t2_login"))?.clients).toBe(0);
      await client.end();
      // The client left; PgBouncer keeps its server connection idle in the pool: no client, the backend stays.
      await eventually(async () => expect((await pooledUseOf(server, "mds_t1_login"))?.clients).toBe(0));
      expect((await backends()).length).toBe(1);
      const pid = Number((await readFile(path.join(dir, "pgbouncer", "pgbouncer.pid"), "utf8")).trim());
      process.kill(pid, "SIGKILL");
      await eventually(async () => expect(await pooledUseOf(server, "mds_t1_login")).toEqual(noUse));
    } finally {
      await client.end().catch(() => {});
      await server.end();
    }
  });
});

const noUse = { clients: 0, serverPids: new Set<number>() };
