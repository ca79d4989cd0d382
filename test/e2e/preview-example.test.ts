import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments, stringify } from "yaml";
import { kubectlPath } from "@mds/devkube/kubectl-path";
import { SecretType, type KubeObject, type Secret } from "../../src/kube/types.ts";
import { decodeData } from "../../src/operator/secret/render.ts";
import { DatabaseType } from "../../src/resources/types.ts";
import { counterparts, eventually, startStack, type Stack } from "./helpers.ts";

// examples/preview/ as a platform team copies it: the manifests Argo CD's pull request generator
// and Flux's ResourceSet would render for two pull requests each (their template parameters substituted here, the
// Argo CD overlay built by the real `kubectl kustomize`), applied with the real kubectl. Each PR's Database is a
// clone of staging on the PR's branch, its Secret connects the app, and its expiry deletes it.

const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, "../..");
const examples = path.join(root, "examples/preview");
let stack: Stack;

type Json = Record<string, unknown>;
type Pr = { number: string; branch: string; head_sha: string };
const argoPrs: Pr[] = [
  { number: "7", branch: "feature/checkout", head_sha: "7a".repeat(20) },
  { number: "8", branch: "fix/cart-total", head_sha: "8b".repeat(20) },
];
const fluxPrs = [
  { id: "9", branch: "feature/search", sha: "9c".repeat(20) },
  { id: "10", branch: "chore/deps", sha: "0d".repeat(20) },
];

const docsOf = async (file: string) =>
  parseAllDocuments(await readFile(path.join(examples, file), "utf8")).map((d) => d.toJS() as Json);

/** Go template parameters as the ApplicationSet controller substitutes them ({{.key}}). */
const argoRender = (text: string, pr: Pr) =>
  text.replace(/\{\{\s*\.(\w+)\s*\}\}/g, (_m, key: string) => {
    const v = pr[key as keyof Pr];
    if (v === undefined) throw new Error(`missingkey=error: ${key}`);
    return v;
  });
/** ResourceSet inputs as the Flux Operator substitutes them (<< inputs.key >>). */
const fluxRender = (text: string, inputs: Record<string, string>) =>
  text.replace(/<<\s*inputs\.(\w+)\s*>>/g, (_m, key: string) => {
    const v = inputs[key];
    if (v === undefined) throw new Error(`no input ${key}`);
    return v;
  });

/** The Application of one PR, and what Argo CD applies for it: its kustomize options over the app folder. */
async function argoManifests(pr: Pr): Promise<string> {
  const [appSet] = await docsOf("argocd/applicationset.yaml");
  const template = (appSet!["spec"] as { template: Json }).template;
  const app = JSON.parse(argoRender(JSON.stringify(template), pr)) as {
    metadata: { name: string };
    spec: { source: { path: string; kustomize: Json } };
  };
  expect(app.metadata.name).toBe(`shop-pr-${pr.number}`);
  const overlay = await mkdtemp(path.join(os.tmpdir(), "mds-argocd-"));
  try {
    const base = path.relative(overlay, path.join(root, app.spec.source.path));
    await writeFile(
      path.join(overlay, "kustomization.yaml"),
      stringify({ resources: [base], ...app.spec.source.kustomize }),
    );
    const { stdout } = await run(await kubectlPath(), ["kustomize", overlay]);
    return stdout;
  } finally {
    await rm(overlay, { recursive: true, force: true });
  }
}

/** What the ResourceSet applies for one PR (in the test's namespace). */
async function fluxManifests(inputs: Record<string, string>): Promise<string> {
  const resourceSet = (await docsOf("flux/resourceset.yaml")).find((d) => d["kind"] === "ResourceSet")!;
  const resources = JSON.parse(fluxRender(JSON.stringify((resourceSet["spec"] as Json)["resources"]), inputs)) as {
    metadata: Json;
  }[];
  return resources
    .map((r) => stringify({ ...r, metadata: { ...r.metadata, namespace: stack.namespace } }))
    .join("---\n");
}

type Status = {
  id?: string;
  source?: { type: string; databaseId: string };
  branch?: { id: string; gitName: string; role: string };
  expiresAt?: string;
  conditions?: { type: string; status: string }[];
};
const statusOf = async (name: string) =>
  (await stack.kube.get<KubeObject>(DatabaseType, stack.namespace, name))?.["status"] as Status | undefined;
const ready = (name: string) =>
  eventually(
    async () => {
      const s = await statusOf(name);
      if (!s?.conditions?.some((c) => c.type === "Ready" && c.status === "True")) throw new Error(`${name} not ready`);
      return s;
    },
    { what: `${name} Ready`, timeoutMs: 120_000 },
  );
const secretEnv = async (name: string) =>
  decodeData((await stack.kube.get<Secret>(SecretType, stack.namespace, name))!);

async function query(url: string, sql: string) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(sql)).rows;
  } finally {
    await client.end();
  }
}

const remoteStatus = async (path: string) =>
  (await fetch(`${stack.service.url}${path}`, { headers: { authorization: `Bearer ${stack.service.token}` } })).status;

describe.each(counterparts)("examples/preview against %s", (counterpart) => {
  // The previews the first test expires, with what they had: the second push must bring new ones.
  const expired = new Map<string, Status>();
  beforeAll(async () => {
    stack = await startStack({ api: counterpart });
    await stack.startOperator();
  }, 120_000);
  afterAll(async () => {
    const leaks = stack === undefined ? "" : await stack.leaks();
    await stack?.stop();
    expect(leaks).toBe("");
  });

  it("each PR gets a clone of staging on its branch whose Secret the app connects with; expiry deletes it", async () => {
    await stack.kubectl(["apply", "-f", path.join(examples, "staging.yaml")]);
    const staging = await ready("staging");
    expect(staging.branch).toMatchObject({ gitName: "main", role: "production" });
    await query(
      (await secretEnv("staging"))["DATABASE_URL"]!,
      "create table products (sku text primary key, price int); insert into products values ('mug', 12), ('tee', 20)",
    );

    for (const pr of argoPrs) await stack.kubectl(["apply", "-f", "-"], await argoManifests(pr));
    for (const pr of fluxPrs) await stack.kubectl(["apply", "-f", "-"], await fluxManifests(pr));
    const previews = [
      ...argoPrs.map((pr) => ({ name: `shop-preview-pr-${pr.number}`, branch: pr.branch })),
      ...fluxPrs.map((pr) => ({ name: `shop-preview-pr-${pr.id}`, branch: pr.branch })),
    ];
    for (const p of previews) {
      const s = await ready(p.name);
      expect(s.source).toEqual({ type: "database", databaseId: staging.id });
      expect(s.branch).toMatchObject({ gitName: p.branch, role: "preview" });
      // 72 h after creation: the renewal key (the head commit) was there from the start.
      expect(Date.parse(s.expiresAt!) - Date.now()).toBeGreaterThan(71 * 3_600_000);
      // The app's Deployment names the PR's Secret; what envFrom gives the container connects and has staging's rows.
      const deployment = JSON.parse(await stack.kubectl(["get", "deployment", p.name, "-o", "json"])) as {
        spec: { template: { spec: { containers: { envFrom: { secretRef: { name: string } }[] }[] } } };
      };
      const secretName = deployment.spec.template.spec.containers[0]!.envFrom[0]!.secretRef.name;
      expect(secretName).toBe(p.name);
      const env = await secretEnv(secretName);
      expect(await query(env["DATABASE_URL"]!, "select sku, price from products order by sku")).toEqual([
        { sku: "mug", price: 12 },
        { sku: "tee", price: 20 },
      ]);
      const { stdout } = await run(process.execPath, [path.join(root, "examples/app/app.ts")], {
        env: { PATH: process.env["PATH"] ?? "", ...env },
      });
      expect(stdout).toMatch(/connected to database \S+ as \S+ .*visits: 1/);
    }

    // Expiry: one preview of each tool expires (its lifetime shortened, as three days without a push would):
    // the operator deletes the resource, its remote database and its preview branch; the others stay.
    for (const name of ["shop-preview-pr-7", "shop-preview-pr-9"]) {
      const s = (await statusOf(name))!;
      expired.set(name, s);
      await stack.kubectl(["patch", "databases.mds.dev", name, "--type=merge", "-p", '{"spec":{"expireAfter":"1s"}}']);
      await eventually(
        async () => {
          const out = await stack.kubectl(["get", "databases.mds.dev", name, "--ignore-not-found", "-o", "name"]);
          if (out.trim() !== "") throw new Error(`${name} still there`);
        },
        { what: `${name} expired and deleted`, timeoutMs: 90_000 },
      );
      expect(await remoteStatus(`/v1/databases/${s.id}`)).toBe(404);
      expect(await remoteStatus(`/v1/branches/${s.branch!.id}`)).toBe(404);
    }
    for (const name of ["shop-preview-pr-8", "shop-preview-pr-10"]) expect((await statusOf(name))?.id).toBeDefined();
  }, 480_000);

  it("the next push after an expiry brings a fresh clone on a new branch, within the service's replay window", async () => {
    expect([...expired.keys()]).toEqual(["shop-preview-pr-7", "shop-preview-pr-9"]);
    await query((await secretEnv("staging"))["DATABASE_URL"]!, "insert into products values ('cap', 15)");
    // Argo CD syncs the new commit; Flux's next reconciliation (here: the PR's new head) applies the same names again.
    await stack.kubectl(["apply", "-f", "-"], await argoManifests({ ...argoPrs[0]!, head_sha: "7e".repeat(20) }));
    await stack.kubectl(["apply", "-f", "-"], await fluxManifests({ ...fluxPrs[0]!, sha: "9e".repeat(20) }));
    for (const [name, before] of expired) {
      const s = await ready(name);
      expect(s.id).not.toBe(before.id);
      expect(s.branch).toMatchObject({ gitName: before.branch!.gitName, role: "preview" });
      expect(s.branch!.id).not.toBe(before.branch!.id);
      const env = await secretEnv(name);
      expect(await query(env["DATABASE_URL"]!, "select sku from products order by sku")).toEqual([
        { sku: "cap" },
        { sku: "mug" },
        { sku: "tee" },
      ]);
    }
  }, 240_000);
});
