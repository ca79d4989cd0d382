import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SecretType, type KubeObject, type Secret } from "../../src/kube/types.ts";
import { decodeData } from "../../src/operator/secret/render.ts";
import type { Operator } from "../../src/operator/index.ts";
import { DatabaseType } from "../../src/resources/types.ts";
import { counterparts, eventually, manifests, startStack, type Stack } from "./helpers.ts";

// Rotation without downtime: an app keeps querying through the Secret's DATABASE_URL, re-reading the Secret as a
// mounted volume would, while the operator rotates every few seconds. The documented reconnect: when the Secret's
// URL changes the app opens a new connection and closes the old one. No query may fail, and once a replaced
// login's grace period is over it can no longer connect.

describe.each(counterparts)("credential rotation against %s", (api) => {
  let stack: Stack;
  let operator: Operator;

  beforeAll(async () => {
    stack = await startStack({ api });
    operator = await stack.startOperator();
  });
  afterAll(async () => {
    await operator?.stop();
    await stack?.stop();
  });

  const secretUrl = async () => {
    const s = await stack.kube.get<Secret>(SecretType, stack.namespace, "rotating-db");
    return s === undefined ? undefined : decodeData(s)["DATABASE_URL"];
  };
  const canConnect = async (url: string) => {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
    try {
      await client.connect();
      await client.query("select 1");
      return true;
    } catch {
      return false;
    } finally {
      await client.end().catch(() => undefined);
    }
  };

  it("rotates every few seconds while an app keeps querying: no failed query, every retired login refused", async () => {
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests(
        {
          apiVersion: "mds.dev/v1alpha1",
          kind: "Project",
          metadata: { name: "rot", namespace: stack.namespace },
          spec: { region: "us-east-1" },
        },
        {
          apiVersion: "mds.dev/v1alpha1",
          kind: "Database",
          metadata: { name: "rotating", namespace: stack.namespace },
          spec: {
            projectRef: { name: "rot" },
            connectionSecret: { name: "rotating-db", endpoint: "direct", rotation: { every: "3s", gracePeriod: "2s" } },
          },
        },
      ),
    );
    await eventually(
      async () => {
        const db = await stack.kube.get<KubeObject>(DatabaseType, stack.namespace, "rotating");
        const ready = (
          db?.["status"] as { conditions?: { type: string; status: string }[] } | undefined
        )?.conditions?.find((c) => c.type === "Ready");
        if (ready?.status !== "True") throw new Error(`not Ready: ${JSON.stringify(ready)}`);
      },
      { what: "Database Ready" },
    );
    let url = (await secretUrl())!;

    // The app: re-reads the Secret every 100 ms; on a new URL connects anew and closes the old connection.
    const seen: string[] = [url];
    let client = new pg.Client({ connectionString: url });
    await client.connect();
    let queries = 0;
    const failures: string[] = [];
    const until = Date.now() + 16_000;
    while (Date.now() < until) {
      const latest = await secretUrl();
      if (latest !== undefined && latest !== url) {
        const next = new pg.Client({ connectionString: latest });
        await next.connect();
        await client.end().catch(() => undefined);
        [client, url] = [next, latest];
        seen.push(url);
      }
      try {
        await client.query("select 1");
        queries++;
      } catch (err) {
        failures.push((err as Error).message);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    await client.end();

    expect(failures).toEqual([]);
    expect(queries).toBeGreaterThan(50);
    expect(seen.length).toBeGreaterThanOrEqual(3);
    // Every login but the current one has passed its grace period (2 s) or will within it: then it is refused.
    await eventually(
      async () => {
        for (const old of seen.slice(0, -1))
          if (await canConnect(old)) throw new Error("a retired login still connects");
      },
      { what: "retired logins refused", timeoutMs: 20_000 },
    );
    const db = await stack.kube.get<KubeObject>(DatabaseType, stack.namespace, "rotating");
    const status = db?.["status"] as {
      rotation?: { lastRotationTime?: string; nextRotationTime?: string };
      binding?: { name: string };
    };
    expect(status.rotation?.lastRotationTime).toBeDefined();
    expect(status.rotation?.nextRotationTime).toBeDefined();
    expect(status.binding).toEqual({ name: "rotating-db" });
    expect(await stack.leaks()).toBe("");
  }, 90_000);
});
