// What deploy/, the chart and the docs say about each kind comes from the kind registry (src/resources/index.ts):
// nothing is stale, and a new kind changes it all by its module alone. The proof adds a throwaway kind shaped like a
// `DatabaseUser` (a role with grants on a Database) through its module and one registry line, and reads what the
// generators, the API's writes and the secret scan make of it.
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { managedController, parseOrTerminal } from "../../src/operator/controller.ts";
import type { CrashPoint } from "../../src/operator/crash-points.ts";
import { Conditions } from "../../src/resources/conditions.ts";
import { group, version } from "../../src/resources/group.ts";
import { apiWrites, conditionReasons, crashPointDeclarations, kindModules, secretKeys } from "../../src/resources/index.ts";
import { redactPaths } from "../../src/cli/operator.ts";
import { connectionSecretValues } from "../support/chaos/invariants.ts";
import pino from "pino";
import { mdsRemote } from "../../src/resources/mds-remote.ts";
import type { KindModule } from "../../src/resources/kit/kind-module.ts";
import { conditionsHealthScript } from "../../src/resources/kit/kind-module.ts";
import { age, condition } from "../../src/resources/kit/printer-columns.ts";
import type { MdsApi, MdsRemote } from "../../src/resources/remote/remote-api.ts";
import { sharedApiCalls } from "../../src/resources/remote/shared-calls.ts";
import { renderConditions, renderTroubleshooting } from "../../scripts/docs/conditions.ts";
import { renderCrashPoints } from "../../scripts/docs/crash-points.ts";
import { renderCli } from "../../scripts/docs/cli.ts";
import { operatorHelp, parseOperatorConfig } from "../../src/cli/operator-config.ts";
import { duration } from "../../src/resources/kit/settings.ts";
import { repoRoot } from "../../scripts/docs/generate.ts";
import { renderRegistryFiles, staleRegistryFiles } from "../../scripts/registry.ts";
import { createFakeApi } from "../support/fake-api.ts";
import { customResourcesOf, mdsCustomResources } from "../support/secret-scan.ts";
import { parseAllDocuments } from "yaml";

// --- database-user/schema.ts, controller.ts, index.ts: the whole folder of the new kind, as data and a handler.
interface UserApi {
  createDatabaseUser(databaseId: string, body: { name: string; grants: string[] }): Promise<{ id: string }>;
  deleteDatabaseUser(id: string): Promise<void>;
}
type UserRemote = Omit<MdsRemote, "api"> & { api: MdsApi & UserApi };
const UserSpec = z
  .object({
    databaseRef: z.object({ name: z.string().max(253).describe("The Database.") }).describe("Where the role lives."),
    grants: z.array(z.enum(["SELECT", "INSERT", "UPDATE", "DELETE"])).max(4).describe("What it may do."),
    deletionProtection: z.boolean().default(false).describe("Refuse deleting it."),
  })
  .describe("A login role with grants on a Database.");
const User = z
  .object({
    apiVersion: z.string().max(64).describe("API version."),
    kind: z.string().max(64).describe("Kind."),
    metadata: z.looseObject({ name: z.string() }).describe("Metadata."),
    spec: UserSpec,
    status: z.object({ conditions: Conditions.optional() }).optional().describe("What the operator saw."),
  })
  .describe("A database user.");
const userGrants: CrashPoint = {
  name: "databaseuser:after-grant",
  between: "the role created → its grants given",
  restart: "grant again (GRANT is idempotent)",
};
interface UserSettings {
  /** How long a grant the service refused is retried before the user is Stalled. */
  grantRetryMs?: number | undefined;
}
const databaseUserModule: KindModule<UserRemote, UserSettings> = {
  definition: {
    kind: "DatabaseUser",
    plural: "databaseusers",
    singular: "databaseuser",
    shortNames: ["mdsuser"],
    spec: UserSpec,
    status: z.object({}).describe("Status."),
    whole: User,
    printerColumns: [condition("Ready"), age],
  },
  access: { verbs: ["patch"], why: "finalizer by merge patch" },
  deletionProtection: true,
  api: { reads: ["getDatabase"], writes: ["createDatabaseUser", "deleteDatabaseUser"] },
  reasons: {
    GrantRefused: {
      condition: "DatabaseUser `Synced=False`",
      argo: "Degraded",
      means: "The service refused a grant the spec names.",
      fix: "Fix `spec.grants`.",
    },
  },
  secretKeys: ["USER_PASSWORD"],
  settings: {
    grantRetryMs: {
      flag: "databaseuser-grant-retry",
      env: "MDS_DATABASEUSER_GRANT_RETRY",
      help: "how long a refused grant is retried (default 5m)",
      parse: duration(0, 3_600_000),
    },
  },
  controller: (settings) =>
    managedController(
      {
        kind: "DatabaseUser",
        type: { group, version, plural: "databaseusers", kind: "DatabaseUser", namespaced: true },
        steps: ["create", "delete"],
        stallingReasons: settings.grantRetryMs === 0 ? ["GrantRefused"] : [],
        crashPoints: [userGrants],
      },
      () => ({
        kind: "DatabaseUser",
        type: { group, version, plural: "databaseusers", kind: "DatabaseUser", namespaced: true },
        parse: (raw) => parseOrTerminal(User, "DatabaseUser", raw) as never,
        connect: () => Promise.reject(new Error("not run in this test")),
      }),
    ),
  healthScript: conditionsHealthScript,
};
// --- src/resources/index.ts: the one line.
const withUser = [...kindModules, databaseUserModule as unknown as (typeof kindModules)[number]];

describe("files generated from the kind registry", () => {
  it("are current (`npm run registry` writes them, `npm run docs:reference` the docs)", async () => {
    expect(await staleRegistryFiles()).toEqual([]);
  });

  it("the writes a replica that is not the leader refuses are the kinds' and the shared components'", () => {
    expect([...mdsRemote.writes].sort()).toEqual(apiWrites().sort());
    expect(apiWrites()).toEqual(expect.arrayContaining([...sharedApiCalls.writes]));
  });

  it("the fake API implements exactly the calls the kinds and the shared components declare", () => {
    const declared = new Set<string>([
      ...sharedApiCalls.reads,
      ...sharedApiCalls.writes,
      ...kindModules.flatMap((k) => [...k.api.reads, ...k.api.writes]),
    ]);
    const testControls = ["expireReplays", "failNext", "loseNextResponse", "moveEndpoints", "replaysIdempotencyKeys"];
    const fake = createFakeApi() as unknown as Record<string, unknown>;
    const implemented = Object.keys(fake).filter((k) => typeof fake[k] === "function" && !testControls.includes(k));
    expect(implemented.sort()).toEqual([...declared].sort());
  });
});

describe("a DatabaseUser-shaped kind added by its module and one registry line", () => {
  type Rule = { apiGroups: string[]; resources: string[]; verbs: string[] };
  const rulesOf = (yaml: string) =>
    parseAllDocuments(yaml)
      .map((d) => d.toJS() as { metadata?: { name?: string }; rules?: Rule[] })
      .filter((d) => d.metadata?.name === "mds-operator")
      .flatMap((d) => d.rules ?? [])
      .filter((r) => r.apiGroups.includes(group));

  it("gets its RBAC rule and its status in the ClusterRole, the single-namespace Role and the chart", async () => {
    const files = new Map((await renderRegistryFiles(withUser)).map((f) => [f.path, f.text]));
    for (const path of ["deploy/base/cluster-role.yaml", "deploy/components/single-namespace/role.yaml"]) {
      const rules = rulesOf(files.get(path)!);
      expect(rules).toContainEqual({ apiGroups: [group], resources: ["databaseusers"], verbs: ["list", "watch", "patch"] });
      expect(rules.find((r) => r.verbs.join() === "patch")?.resources).toContain("databaseusers/status");
    }
    expect(files.get("charts/mds/templates/_helpers.tpl")).toContain('resources: ["databaseusers"]');
  });

  it("is covered by the deletion-protection policy, in deploy/ and in the chart", async () => {
    const files = new Map((await renderRegistryFiles(withUser)).map((f) => [f.path, f.text]));
    for (const path of ["deploy/base/deletion-protection.yaml", "charts/mds/templates/deletion-protection.yaml"]) {
      expect(files.get(path)).toContain('resources: ["projects", "databases", "connections", "databaseusers"]');
    }
  });

  it("brings its crash points (the loop's for its steps, and its own) to docs/crash-points.md", () => {
    const doc = renderCrashPoints(crashPointDeclarations(withUser));
    expect(doc).toContain("| `after-grant` | `databaseuser` | the role created → its grants given | grant again");
    expect(doc).toMatch(/\| `after-create` \| `project`, `database`, `connection`, `databaseuser` \|/);
    expect(doc).not.toMatch(/\| `after-update` \|[^|]*databaseuser/);
    expect(doc).toContain(`${crashPointDeclarations().length + 5} named points`);
  });

  it("brings its condition reasons to docs/conditions.md and the troubleshooting table, after the others", async () => {
    const row = "| `GrantRefused` | DatabaseUser `Synced=False` | Degraded | The service refused a grant the spec names. | Fix `spec.grants`. |";
    const troubleshooting = await renderTroubleshooting(repoRoot, conditionReasons(withUser));
    expect(troubleshooting).toContain(`| Fix the spec as the message says; immutable fields need a new resource. |`);
    expect(troubleshooting).toContain(`${row}\n<!-- end of the generated reasons -->`);
    expect(await renderTroubleshooting(repoRoot)).not.toContain("GrantRefused");
    expect(renderConditions(conditionReasons(withUser))).toContain(
      "| `GrantRefused` | DatabaseUser | DatabaseUser `Synced=False` |  | The service refused a grant the spec names. |",
    );
  });

  it("takes its settings from `mds operator`'s flags and variables, listed in --help and docs/cli.md", () => {
    const env = { MDS_API_URL: "http://api.example" };
    const parsed = (argv: string[], e: Record<string, string> = {}, kinds = withUser) =>
      parseOperatorConfig(argv, { ...env, ...e }, kinds) as { kindSettings: unknown };
    expect(parsed(["--databaseuser-grant-retry", "2m"]).kindSettings).toEqual({ DatabaseUser: { grantRetryMs: 120_000 } });
    expect(parsed([], { MDS_DATABASEUSER_GRANT_RETRY: "0" }).kindSettings).toEqual({ DatabaseUser: { grantRetryMs: 0 } });
    expect(() => parsed(["--databaseuser-grant-retry", "2h"])).toThrow(
      "--databaseuser-grant-retry (MDS_DATABASEUSER_GRANT_RETRY): expected a duration",
    );
    expect(() => parsed(["--databaseuser-grant-retry", "2m"], {}, kindModules)).toThrow("databaseuser-grant-retry");
    const clash = { ...databaseUserModule, settings: { rate: { ...databaseUserModule.settings.grantRetryMs, flag: "api-rate" } } };
    expect(() => parsed([], {}, [...kindModules, clash as unknown as (typeof kindModules)[number]])).toThrow(
      "DatabaseUser's setting --api-rate (MDS_DATABASEUSER_GRANT_RETRY) is one of mds operator's own options",
    );
    expect(operatorHelp(withUser)).toMatch(/DatabaseUser settings:\n\n {2}--databaseuser-grant-retry \(env MDS_DATABASEUSER_GRANT_RETRY\)/);
    expect(operatorHelp()).not.toContain("databaseuser");
    expect(renderCli(withUser)).toContain("| `--databaseuser-grant-retry` | `MDS_DATABASEUSER_GRANT_RETRY` | DatabaseUser | how long a refused grant");
    const stalling = databaseUserModule.controller({ grantRetryMs: 0 }).stallingReasons;
    expect(stalling).toContain("GrantRefused");
  });

  it("has its Secret's secret values removed from the operator's logs and planted by the secret scan", () => {
    expect(secretKeys(withUser)).toEqual([...secretKeys(), "USER_PASSWORD"]);
    const lines: string[] = [];
    const logger = pino({ redact: { paths: redactPaths(withUser), remove: true } }, { write: (l: string) => lines.push(l) });
    logger.info({ rendered: { USER_PASSWORD: "planted-user-password-3d2c", PGPASSWORD: "planted-pg-password-1b0a" } }, "x");
    expect(lines.join("")).not.toMatch(/planted-(user|pg)-password/);
    const secret = {
      metadata: { name: "u", namespace: "shop", labels: { "app.kubernetes.io/managed-by": "mds-operator" } },
      data: { USER_PASSWORD: Buffer.from("planted-user-password-3d2c").toString("base64") },
    };
    expect(connectionSecretValues([secret], secretKeys(withUser))).toEqual([
      { name: "shop/u.USER_PASSWORD", value: "planted-user-password-3d2c" },
    ]);
    expect(connectionSecretValues([secret])).toEqual([]);
  });

  it("has its writes refused by a replica that is not the leader, and its objects scanned for secrets", () => {
    expect(apiWrites(withUser)).toEqual(expect.arrayContaining(["createDatabaseUser", "deleteDatabaseUser"]));
    expect(apiWrites()).not.toContain("createDatabaseUser");
    expect(customResourcesOf(withUser).map((r) => r.plural)).toEqual([
      ...mdsCustomResources.map((r) => r.plural),
      "databaseusers",
    ]);
  });
});
