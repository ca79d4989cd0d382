// The with-service overlay's PostgreSQL serves TLS: the manifest turns ssl on with a certificate its init container
// makes, and that init container's own script, run here with the local openssl as an unprivileged user (as in the
// pod: user 999, read-only root), yields a certificate and key with which a real PostgreSQL serves TLS that the
// real psql and the pg driver verify (`verify-full` against the Service's DNS name).
import { spawn } from "node:child_process";
import { chmod, chown, mkdir, mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { findPostgresBinaries, postgresOsUser, startPostgres, type OsUser, type RunningPostgres } from "../../src/postgres/index.ts";
import { kubectl } from "./kubectl.ts";

type EnvVar = { name: string; value?: string; valueFrom?: unknown };
type Mount = { name: string; mountPath: string; readOnly?: boolean };
type Container = { name: string; image: string; command?: string[]; args?: string[]; env?: EnvVar[]; volumeMounts?: Mount[] };
type Pod = { containers: Container[]; initContainers?: Container[]; volumes: ({ name: string } & Record<string, unknown>)[]; securityContext: { runAsUser: number } };

let pod: Pod;
let dir: string;
let user: OsUser | undefined;

function run(command: string, args: string[], env: Record<string, string>): Promise<{ code: number; output: string }> {
  return new Promise((resolve, reject) => {
    // cwd "/": run as the postgres user, a command started in a directory only we may enter (a fresh clone under a
    // 0700 temporary directory) warns on stderr that it cannot change into it.
    const child = spawn(command, args, { env, cwd: "/", stdio: ["ignore", "pipe", "pipe"], ...(user ? { uid: user.uid, gid: user.gid } : {}) });
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    child.once("error", reject);
    child.once("close", (code) => resolve({ code: code ?? -1, output }));
  });
}

beforeAll(async () => {
  const result = await kubectl(["kustomize", "deploy/overlays/with-service"]);
  if (result.code !== 0) throw new Error(`kubectl kustomize failed: ${result.stderr}`);
  const objects = parseAllDocuments(result.stdout).map((d) => d.toJS() as { kind: string; metadata: { name: string }; spec: { template: { spec: Pod } } });
  const statefulSet = objects.find((o) => o.kind === "StatefulSet" && o.metadata.name === "mds-postgres");
  if (!statefulSet) throw new Error("the with-service overlay renders no StatefulSet mds-postgres");
  pod = statefulSet.spec.template.spec;
  user = await postgresOsUser();
  dir = await mkdtemp(join(tmpdir(), "mds-postgres-tls-"));
  // The unprivileged user must reach its directories under the test's (root-owned, 0700) temporary directory.
  await chmod(dir, 0o755);
});

afterAll(async () => {
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

const server = () => pod.containers.find((c) => c.name === "postgres")!;
const init = () => pod.initContainers?.find((c) => c.name === "tls");
/** `-c name=value` settings the postgres container passes to the server. */
const settingsOf = (c: Container) => Object.fromEntries((c.args ?? []).flatMap((a, i, all) => (all[i - 1] === "-c" ? [a.split("=", 2) as [string, string]] : [])));

describe("with-service overlay: the bundled PostgreSQL", () => {
  it("turns ssl on with a certificate and key from an emptyDir its init container fills", () => {
    const settings = settingsOf(server());
    expect(settings.ssl).toBe("on");
    const tlsMount = server().volumeMounts?.find((m) => settings.ssl_key_file?.startsWith(`${m.mountPath}/`));
    expect(tlsMount).toMatchObject({ readOnly: true });
    expect(settings.ssl_cert_file?.startsWith(`${tlsMount?.mountPath}/`)).toBe(true);
    expect(pod.volumes.find((v) => v.name === tlsMount?.name)).toHaveProperty("emptyDir");
    const tls = init();
    expect(tls?.image).toBe(server().image);
    expect(tls?.volumeMounts?.map((m) => m.name)).toEqual(expect.arrayContaining([tlsMount?.name, "data"]));
    expect(tls?.env?.find((e) => e.name === "TLS_DIR")?.value).toBe(tlsMount?.mountPath);
  });

  it("serves TLS that psql and pg verify (verify-full) with the certificate the init script makes, kept across restarts", async () => {
    const tls = init()!;
    const settings = settingsOf(server());
    const tlsDir = join(dir, "run-tls");
    const store = join(dir, "data", "tls");
    await mkdir(tlsDir, { mode: 0o700 });
    await mkdir(join(dir, "data"), { mode: 0o700 });
    if (user) for (const d of [tlsDir, join(dir, "data")]) await chown(d, user.uid, user.gid);
    // The manifest's environment, its two paths moved under the test directory; HOME unwritable, as in the pod.
    const env: Record<string, string> = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: "/nonexistent" };
    for (const e of tls.env ?? []) env[e.name] = e.value ?? "";
    Object.assign(env, { POD_NAMESPACE: "mds-system", TLS_STORE: store, TLS_DIR: tlsDir });
    const [command, ...args] = tls.command!;
    const first = await run(command!, args, env);
    expect(first).toMatchObject({ code: 0 });
    const cert = await readFile(join(tlsDir, "server.crt"), "utf8");
    expect(((await stat(join(tlsDir, "server.key"))).mode & 0o777).toString(8)).toBe("600");
    if (user) expect((await stat(join(tlsDir, "server.key"))).uid).toBe(user.uid);
    // A restart of the pod runs it again: the same certificate, so clients that pinned it keep verifying.
    expect(await run(command!, args, env)).toMatchObject({ code: 0 });
    expect(await readFile(join(tlsDir, "server.crt"), "utf8")).toBe(cert);

    // The server's settings name files in the pod's TLS_DIR: the same files here.
    const podTlsDir = tls.env!.find((e) => e.name === "TLS_DIR")!.value!;
    const local = (file: string | undefined) => join(tlsDir, relative(podTlsDir, file ?? ""));
    let postgres: RunningPostgres | undefined;
    try {
      postgres = await startPostgres({ dir: join(dir, "pg"), settings: { fsync: "off", ssl: "on", ssl_cert_file: local(settings.ssl_cert_file), ssl_key_file: local(settings.ssl_key_file) } });
      const password = decodeURIComponent(new URL(postgres.url).password);
      const name = "mds-postgres.mds-system.svc";
      const query = "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()";
      // libpq checks the certificate against `host` and connects to `hostaddr`.
      const bindir = (await findPostgresBinaries()).bindir;
      const psql = await run(join(bindir, "psql"), ["-XAtc", query, `host=${name} hostaddr=127.0.0.1 port=${postgres.port} user=postgres dbname=postgres sslmode=verify-full sslrootcert=${join(tlsDir, "server.crt")}`], { PGPASSWORD: password, PATH: env.PATH! });
      expect(psql).toEqual({ code: 0, output: "t\n" });
      const client = new pg.Client({ host: "127.0.0.1", port: postgres.port, user: "postgres", password, database: "postgres", ssl: { ca: cert, servername: name } });
      await client.connect();
      try {
        expect((await client.query<{ ssl: boolean }>(query)).rows[0]?.ssl).toBe(true);
      } finally {
        await client.end();
      }
      // Another name than the certificate's is refused by a client that verifies.
      const wrong = await run(join(bindir, "psql"), ["-XAtc", "SELECT 1", `host=elsewhere.example hostaddr=127.0.0.1 port=${postgres.port} user=postgres dbname=postgres sslmode=verify-full sslrootcert=${join(tlsDir, "server.crt")}`], { PGPASSWORD: password, PATH: env.PATH! });
      expect(wrong.code).not.toBe(0);
      expect(wrong.output).toMatch(/does not match host name/);
    } finally {
      await postgres?.stop();
    }
  }, 60_000);
});
