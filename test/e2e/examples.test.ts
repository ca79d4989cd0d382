import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SecretType, type KubeObject, type Secret } from "../../src/kube/types.ts";
import { decodeData } from "../../src/operator/secret/render.ts";
import { DatabaseRestoreType, DatabaseType } from "../../src/resources/types.ts";
import { eventually, startStack, type Stack } from "./helpers.ts";

// The newcomer's walk of examples/README.md: apply examples/, the app connects with the Secret as envFrom would
// give it, then the example restore runs once and a re-applied copy is Skipped.

const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, "../..");
let stack: Stack;

beforeAll(async () => {
  stack = await startStack();
  await stack.startOperator();
}, 120_000);

afterAll(async () => {
  await stack?.stop();
});

async function ready(name: string) {
  return eventually(
    async () => {
      const s = (await stack.kube.get<KubeObject>(DatabaseType, stack.namespace, name))?.["status"] as
        { id?: string; conditions?: { type: string; status: string }[] } | undefined;
      if (!s?.conditions?.some((c) => c.type === "Ready" && c.status === "True")) throw new Error(`${name} not ready`);
      return s as { id: string };
    },
    { what: `${name} Ready` },
  );
}

describe("examples/", () => {
  it("kubectl apply -f examples/ gives Secrets an app connects with", async () => {
    await stack.kubectl(["apply", "-f", path.join(root, "examples")]);
    await ready("orders");
    await ready("scratch");
    const secret = (await stack.kube.get<Secret>(SecretType, stack.namespace, "orders-db"))!;
    const env = decodeData(secret);
    expect(env["JDBC_URL"]).toMatch(/^jdbc:postgresql:\/\//);
    expect(secret.metadata.labels?.["app"]).toBe("orders");
    const { stdout } = await run(process.execPath, [path.join(root, "examples/app/app.ts")], {
      env: { PATH: process.env["PATH"] ?? "", ...env },
    });
    expect(stdout).toMatch(/connected to database \S+ as \S+ .*visits: 1/);
    expect(stdout).not.toContain(env["PGPASSWORD"]!);
  });

  it("the example restore runs once; deleted and re-applied it is Skipped", async () => {
    const { id } = await ready("orders");
    const backup = await fetch(`${stack.service.url}/v1/databases/${id}/backups`, {
      method: "POST",
      headers: { authorization: `Bearer ${stack.service.token}` },
    });
    expect(backup.status).toBe(201);
    await eventually(
      async () => {
        const res = await fetch(`${stack.service.url}/v1/databases/${id}/backups`, {
          headers: { authorization: `Bearer ${stack.service.token}` },
        });
        if (((await res.json()) as { data: { status: string }[] }).data[0]?.status !== "completed")
          throw new Error("backup running");
      },
      { what: "backup" },
    );
    const phase = async () =>
      (
        (await stack.kube.get<KubeObject>(DatabaseRestoreType, stack.namespace, "orders-restore-1"))?.["status"] as
          { phase?: string } | undefined
      )?.phase;
    const file = path.join(root, "examples/restore/orders-restore.yaml");
    await stack.kubectl(["apply", "-f", file]);
    await eventually(
      async () => {
        if ((await phase()) !== "Succeeded") throw new Error(String(await phase()));
      },
      { what: "Succeeded" },
    );
    await stack.kubectl(["delete", "-f", file]);
    await stack.kubectl(["apply", "-f", file]);
    await eventually(
      async () => {
        if ((await phase()) !== "Skipped") throw new Error(String(await phase()));
      },
      { what: "Skipped" },
    );
  });
});
