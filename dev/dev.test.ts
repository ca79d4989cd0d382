import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { existsSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { eventually } from "../test/support/eventually.ts";
import { runKubectl } from "../test/support/kubectl.ts";
import { startDevStack, type DevStack } from "./dev-stack.ts";

// `mds dev` end to end, as a newcomer uses it: start, kubectl apply -f examples/, connect with the Secret's
// DATABASE_URL; the supervised operator comes back after a kill; a restart keeps everything.
const examples = fileURLToPath(new URL("../examples", import.meta.url));

async function query(url: string): Promise<string> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<{ db: string }>("SELECT current_database() AS db")).rows[0]!.db;
  } finally {
    await client.end();
  }
}

describe("mds dev", () => {
  let dir = "";
  let stack: DevStack | undefined;
  const kubectl = async (args: string[]) => {
    const res = await runKubectl(stack!.env.KUBECONFIG, args, { cacheDir: join(dir, "kubectl-cache") });
    if (res.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${res.stderr}`);
    return res.stdout;
  };
  const secretUrl = async (name: string) => {
    const b64 = await kubectl(["get", "secret", name, "-o", "jsonpath={.data.DATABASE_URL}"]);
    if (b64 === "") throw new Error(`secret ${name} has no DATABASE_URL yet`);
    return Buffer.from(b64, "base64").toString("utf8");
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "mds-dev-"));
  });
  afterAll(async () => {
    await stack?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it(
    "starts the stack and writes env; kubectl apply -f examples/ gives a Secret that connects",
    { timeout: 240_000 },
    async () => {
      stack = await startDevStack({ dir, operatorArgs: ["--poll-slow", "5s"] });
      const env = await readFile(join(dir, "env"), "utf8");
      expect(env).toContain(`KUBECONFIG=${join(dir, "devkube", "kubeconfig")}\n`);
      expect(env).toMatch(/^MDS_API_URL=http:\/\/127\.0\.0\.1:\d+$/m);
      expect(env).toContain(`MDS_TOKEN=${stack.env.MDS_TOKEN}\n`);
      expect(Number(await readFile(join(dir, "operator.pid"), "utf8"))).toBe(stack.operatorPid());
      // `source .mds/env` exports the variables to programs started from that shell.
      const exported = execFileSync("bash", ["-c", `source ${join(dir, "env")} && env`], {
        encoding: "utf8",
        env: { PATH: process.env.PATH ?? "" },
      });
      expect(exported).toContain(`KUBECONFIG=${stack.env.KUBECONFIG}\n`);
      expect(exported).toContain(`MDS_TOKEN=${stack.env.MDS_TOKEN}\n`);

      // The CRDs are installed whole: their CEL rules (immutable fields, exactly one of) are enforced.
      const installed = JSON.parse(await kubectl(["get", "crd", "databases.mds.dev", "-o", "json"])) as unknown;
      expect(JSON.stringify(installed)).toContain("x-kubernetes-validations");

      await kubectl(["apply", "-f", examples]);
      // The Secret is written first, before the database is provisioned; Ready says it is usable.
      await eventually(
        async () =>
          expect(
            await kubectl(["get", "mdsdb", "orders", "-o", 'jsonpath={.status.conditions[?(@.type=="Ready")].status}']),
          ).toBe("True"),
        { timeoutMs: 60_000, what: "orders Ready" },
      );
      expect(await query(await secretUrl("orders-db"))).toMatch(/\w+/);
    },
  );

  it("serves databases.v1beta1.mds.dev and, through the webhook, databases.v1alpha1.mds.dev with kubectl's deprecation warning", async () => {
    const get = (resource: string) =>
      runKubectl(
        stack!.env.KUBECONFIG,
        ["get", resource, "orders", "-o", "jsonpath={.apiVersion} {.spec.connectionSecret.endpoint}"],
        {
          cacheDir: join(dir, "kubectl-cache"),
        },
      );
    const beta = await get("databases.v1beta1.mds.dev");
    expect({ out: beta.stdout, err: beta.stderr }).toEqual({ out: "mds.dev/v1beta1 Pooled", err: "" });
    const alpha = await get("databases.v1alpha1.mds.dev");
    expect(alpha.stdout).toBe("mds.dev/v1alpha1 pooled");
    expect(alpha.stderr).toContain("Warning: mds.dev/v1alpha1 Database is deprecated; use mds.dev/v1beta1 Database");
  });

  it("enforces deletionProtection as an install does: deploy/base's admission policy refuses the delete", async () => {
    await kubectl(["patch", "mdsdb", "orders", "--type=merge", "-p", '{"spec":{"deletionProtection":true}}']);
    const refused = await runKubectl(stack!.env.KUBECONFIG, ["delete", "mdsdb", "orders", "--wait=false"], {
      cacheDir: join(dir, "kubectl-cache"),
    });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      "ValidatingAdmissionPolicy 'mds-deletion-protection' with binding 'mds-deletion-protection' denied request: spec.deletionProtection is true",
    );
    await kubectl(["patch", "mdsdb", "orders", "--type=merge", "-p", '{"spec":{"deletionProtection":false}}']);
  });

  it("refuses a second mds dev on the same directory", async () => {
    await expect(startDevStack({ dir })).rejects.toThrow(
      `mds dev already runs with this state directory (pid ${process.pid})`,
    );
  });

  it(
    "restarts the operator after it is killed, and the restarted one rebuilds a deleted Secret",
    { timeout: 120_000 },
    async () => {
      const before = stack!.operatorPid()!;
      const restarted = stack!.nextOperatorStart();
      process.kill(before, "SIGKILL");
      const after = await restarted;
      expect(after).not.toBe(before);
      await eventually(async () => expect(Number(await readFile(join(dir, "operator.pid"), "utf8"))).toBe(after));
      await kubectl(["delete", "secret", "orders-db"]);
      const url = await eventually(() => secretUrl("orders-db"));
      await eventually(() => query(url), { timeoutMs: 30_000, what: "the rebuilt Secret's DATABASE_URL to connect" });
    },
  );

  it("stops cleanly and a restart keeps the state, the token and the credentials", { timeout: 240_000 }, async () => {
    const { MDS_TOKEN, MDS_API_URL } = stack!.env;
    const url = await secretUrl("orders-db");
    await stack!.stop();
    stack = undefined;
    expect(existsSync(join(dir, "env"))).toBe(false);
    expect(existsSync(join(dir, "operator.pid"))).toBe(false);

    stack = await startDevStack({ dir, operatorArgs: ["--poll-slow", "5s"] });
    expect(stack.env.MDS_TOKEN).toBe(MDS_TOKEN);
    expect(stack.env.MDS_API_URL).toBe(MDS_API_URL);
    expect(await secretUrl("orders-db")).toBe(url);
    expect(await query(url)).toMatch(/\w+/);
    await eventually(
      async () =>
        expect(
          await kubectl(["get", "mdsdb", "orders", "-o", 'jsonpath={.status.conditions[?(@.type=="Ready")].status}']),
        ).toBe("True"),
      { timeoutMs: 60_000, what: "orders Ready" },
    );

    // No log of any part holds the API token or a database password.
    const password = decodeURIComponent(new URL(url).password);
    for (const log of ["operator.log", "service.log", "devkube.log"]) {
      const text = await readFile(join(dir, log), "utf8");
      expect(text.includes(MDS_TOKEN), `${log} contains the API token`).toBe(false);
      expect(text.includes(password), `${log} contains a database password`).toBe(false);
    }
  });
});
