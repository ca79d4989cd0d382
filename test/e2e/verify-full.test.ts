import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { generate } from "selfsigned";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SecretType, type KubeObject, type Secret } from "../../src/kube/types.ts";
import { decodeData } from "../../src/operator/secret/render.ts";
import { DatabaseType } from "../../src/resources/types.ts";
import { eventually, manifests, startStack, type Stack } from "./helpers.ts";

// An app verifies the server: the Database's spec gives the server's CA, the operator's Secret carries it (ca.crt)
// and URLs with sslmode=verify-full and sslrootcert at the path the app mounts it; the real psql and the pg driver
// connect with them through PgBouncer (DATABASE_URL) and directly (DIRECT_URL), and refuse a server another CA vouches for.

const run = promisify(execFile);

describe("verify-full through the operator's Secret", () => {
  let stack: Stack;
  let dir: string;
  beforeAll(async () => {
    stack = await startStack();
    await stack.startOperator();
    dir = await mkdtemp(path.join(tmpdir(), "mds-verify-full-"));
  }, 120_000);
  afterAll(async () => {
    await stack?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  const psql = (url: string) =>
    run("psql", ["-XAtc", "SELECT 1", url], { env: { ...process.env, PGSSLROOTCERT: "", PGSSLMODE: "" } });
  const driver = async (url: string) => {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
    try {
      await client.connect();
      await client.query("SELECT 1");
      // The client's own socket: TLS, verified (an unverified one would not have connected with verify-full).
      return (client as unknown as { connection: { stream: { encrypted?: boolean } } }).connection.stream.encrypted;
    } finally {
      await client.end().catch(() => undefined);
    }
  };

  // On a real cluster too: the "app" is this test process, so the mount is a path of this machine either way.
  it("connects with verify-full through the pooler and directly, with psql and pg, and refuses a server another CA signed", async () => {
    const { caCert } = JSON.parse(await readFile(path.join(stack.service.dir, "service.json"), "utf8")) as {
      caCert: string;
    };
    const mountPath = path.join(dir, "ca.crt");
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests(
        {
          apiVersion: "mds.dev/v1alpha1",
          kind: "Project",
          metadata: { name: "tls", namespace: stack.namespace },
          spec: { region: "us-east-1" },
        },
        {
          apiVersion: "mds.dev/v1alpha1",
          kind: "Database",
          metadata: { name: "verified", namespace: stack.namespace },
          spec: { projectRef: { name: "tls" }, connectionSecret: { tls: { caCert, mountPath } } },
        },
      ),
    );
    await eventually(
      async () => {
        const ready = (
          (await stack.kube.get<KubeObject>(DatabaseType, stack.namespace, "verified"))?.["status"] as
            { conditions?: { type: string; status: string }[] } | undefined
        )?.conditions?.find((c) => c.type === "Ready");
        expect(ready?.status).toBe("True");
      },
      { what: "verified Ready", timeoutMs: 60_000 },
    );
    const data = decodeData((await stack.kube.get<Secret>(SecretType, stack.namespace, "verified"))!);
    expect(data["ca.crt"]).toBe(caCert);
    expect(data["PGSSLMODE"]).toBe("verify-full");
    expect(data["PGSSLROOTCERT"]).toBe(mountPath);
    const pooled = new URL(data["DATABASE_URL"]!);
    const direct = new URL(data["DIRECT_URL"]!);
    expect(pooled.port).not.toBe(direct.port);
    for (const u of [pooled, direct])
      expect([u.searchParams.get("sslmode"), u.searchParams.get("sslrootcert")]).toEqual(["verify-full", mountPath]);

    // The app mounts ca.crt at mountPath.
    await writeFile(mountPath, data["ca.crt"]!);
    for (const url of [data["DATABASE_URL"]!, data["DIRECT_URL"]!]) {
      expect((await psql(url)).stdout.trim()).toBe("1");
      expect(await driver(url)).toBe(true);
    }

    // Another CA at the mount: both clients refuse the server.
    const other = await generate([{ name: "commonName", value: "someone else's CA" }], {
      keyType: "ec",
      algorithm: "sha256",
      extensions: [{ name: "basicConstraints", cA: true, critical: true }],
    });
    await writeFile(mountPath, other.cert);
    for (const url of [data["DATABASE_URL"]!, data["DIRECT_URL"]!]) {
      await expect(psql(url)).rejects.toThrow(/certificate verify failed|SSL error/i);
      await expect(driver(url)).rejects.toThrow();
    }
    expect(await stack.leaks()).toBe("");
  }, 120_000);
});
