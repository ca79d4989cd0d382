import pg from "pg";
import { afterAll, beforeAll, describe, expect } from "vitest";
import { counterparts, eventually, itNeedsDevkube, manifests, startStack, type Stack } from "./helpers.ts";

// The operator reads and writes the CRDs' storage version (v1beta1), converting at its own client
// (src/resources/conversion/wire.ts): with the conversion webhook down, v1alpha1 is unreadable for every other
// client, and the operator still takes a Database to Ready and writes its status in v1beta1's spellings.

let stack: Stack;

describe.each(counterparts)("the operator speaks v1beta1 against %s", (api) => {
  beforeAll(async () => {
    stack = await startStack({ api });
  }, 120_000);
  afterAll(async () => {
    await stack?.stop();
  });

  itNeedsDevkube(
    "keeps working with the conversion webhook down",
    "conversion webhook, run beside it, to stop (a real cluster's runs in the cluster)",
    async () => {
      await stack.webhook!.stop();
      const ns = stack.namespace;
      await stack.kubectl(
        ["apply", "-f", "-"],
        manifests(
          {
            apiVersion: "mds.dev/v1beta1",
            kind: "Project",
            metadata: { name: "shop", namespace: ns },
            spec: { region: "us-east-1" },
          },
          {
            apiVersion: "mds.dev/v1beta1",
            kind: "Database",
            metadata: { name: "orders", namespace: ns },
            spec: { projectRef: { name: "shop" }, connectionSecret: { endpoint: "Direct" } },
          },
        ),
      );
      // Every other client asking for v1alpha1 now fails, as kube-apiserver answers when the webhook is unreachable.
      await expect(stack.kubectl(["get", "databases.v1alpha1.mds.dev", "orders", "-o", "name"])).rejects.toThrow(
        /conversion webhook/,
      );
      await stack.startOperator();
      const status = await eventually(
        async () => {
          const db = JSON.parse(await stack.kubectl(["get", "databases.v1beta1.mds.dev", "orders", "-o", "json"])) as {
            status?: {
              conditions?: { type: string; status: string }[];
              credentials?: { source?: string };
              secretName?: string;
            };
          };
          if (db.status?.conditions?.find((c) => c.type === "Ready")?.status !== "True") throw new Error("not Ready");
          return db.status;
        },
        { what: "orders Ready with the webhook down" },
      );
      // Written in v1beta1's spelling by the operator itself: no conversion happened on the way.
      expect(status.credentials?.source).toMatch(/^[A-Z]/);
      const secret = JSON.parse(await stack.kubectl(["get", "secret", status.secretName!, "-o", "json"])) as {
        data: Record<string, string>;
      };
      const url = Buffer.from(secret.data["DATABASE_URL"]!, "base64").toString();
      expect(url).toBe(Buffer.from(secret.data["DIRECT_URL"]!, "base64").toString());
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        expect((await client.query<{ one: number }>("select 1 as one")).rows[0]!.one).toBe(1);
      } finally {
        await client.end();
      }
    },
    120_000,
  );
});
