import { spawn, type ChildProcess } from "node:child_process";
import { createWriteStream } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import { SecretType, type KubeObject, type ResourceType, type Secret } from "../../src/kube/types.ts";
import { DatabaseType } from "../../src/resources/types.ts";
import { crdVersionAnnotation } from "../../src/resources/kit/crd.ts";
import { main } from "../../src/cli/main.ts";
import { startFaultProxy, type FaultProxy } from "../support/fault-proxy.ts";
import { caBundlesInjected } from "../support/webhook-process.ts";
import { buildPreviousRelease, currentVersion, previousRelease, repoRoot } from "../support/previous-release.ts";
import { applyFleet, comparableStatus, fleet, getObj, settled, snapshot, type Snapshot } from "./fleet.ts";
import {
  changingCrdsNote,
  counterparts,
  describeChangingCrds,
  eventually,
  manifests,
  realClusterFromEnv,
  startStack,
  type Stack,
} from "./helpers.ts";

// Upgrade and rollback with live resources of every kind (test/e2e/fleet.ts): the previous release, built from git
// history, runs on the cluster against either counterpart; then the operator is rolled to this tree the way a
// Deployment rolls (the new pod starts while the old one still leads, the Lease passes when the old one stops) and
// this tree's CRDs are applied; then the operator (not the CRDs) is rolled back to the previous release. After each
// roll: nothing created or deleted at the service, no Secret rewritten, no restore re-run, no backup duplicated,
// every resource settled again with its status carried over, and the service called at most ⌈N/100⌉ + 5 times
// per resync. Between the roll and the rollback `mds migrate-storage` rewrites every object in v1beta1 (storedVersions
// [v1beta1]), so the rolled-back release reads only objects stored as v1beta1, served to it as v1alpha1 by the
// conversion webhook. Runs on a real cluster too (MDS_E2E_KUBECONFIG), in the test's namespaces with its own Lease.
// Whatever CRDs this tree generates (crds/) are the ones rolled to.

const previous = previousRelease;
const version = await currentVersion();
const pollSlowMs = 30_000;
const LeaseType: ResourceType = {
  group: "coordination.k8s.io",
  version: "v1",
  plural: "leases",
  kind: "Lease",
  namespaced: true,
};
const CrdType: ResourceType = {
  group: "apiextensions.k8s.io",
  version: "v1",
  plural: "customresourcedefinitions",
  kind: "CustomResourceDefinition",
  namespaced: false,
};

interface OperatorProcess {
  identity: string;
  child: ChildProcess;
  logFile: string;
  exited: Promise<void>;
}

describeChangingCrds.each(counterparts)("upgrade from %s and rollback" + changingCrdsNote, (counterpart) => {
  let dir: string;
  let tree: string;
  let stack: Stack;
  let proxy: FaultProxy;
  let before: Snapshot;
  const operators: OperatorProcess[] = [];
  const real = realClusterFromEnv();

  /** `mds operator` from `root`, as its Deployment runs it: leader election in the test's namespace. */
  function startOperator(root: string, identity: string, env: Record<string, string> = {}): OperatorProcess {
    const logFile = path.join(dir, `operator-${identity}.log`);
    const out = createWriteStream(logFile);
    const child = spawn(
      process.execPath,
      [
        path.join(root, "bin/mds.js"),
        "operator",
        "--kubeconfig",
        stack.devkube?.kubeconfigPath ?? real!.kubeconfigPath,
        ...(real?.context === undefined ? [] : ["--context", real.context]),
        "--api-url",
        proxy.url,
        "--credentials-secret",
        `${stack.namespace}/mds-credentials`,
        "--instance-id",
        "e2e",
        "--identity",
        identity,
        "--leader-elect",
        "--lease-namespace",
        stack.namespace,
        "--poll-fast",
        "200ms",
        "--poll-slow",
        `${pollSlowMs / 1000}s`,
        "--metrics-address",
        "off",
        "--log-level",
        "debug",
        ...(real === undefined ? [] : ["--namespaces", stack.namespaces.join(",")]),
      ],
      {
        cwd: root,
        stdio: ["ignore", "pipe", "pipe"],
        env: { PATH: process.env["PATH"] ?? "", HOME: process.env["HOME"] ?? "", ...env },
      },
    );
    child.stdout!.pipe(out);
    child.stderr!.pipe(out);
    const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
    const p = { identity, child, logFile, exited };
    operators.push(p);
    return p;
  }

  async function stopOperator(p: OperatorProcess): Promise<void> {
    p.child.kill("SIGTERM");
    await p.exited;
  }

  const leader = async () =>
    (
      (await stack.kube.get<KubeObject>(LeaseType, stack.namespace, "mds-operator"))?.["spec"] as
        { holderIdentity?: string } | undefined
    )?.holderIdentity;
  const waitLeader = (identity: string) =>
    eventually(async () => expect(await leader()).toBe(identity), { what: `${identity} leads`, timeoutMs: 60_000 });
  const waitStarted = (p: OperatorProcess) =>
    eventually(async () => expect(await readFile(p.logFile, "utf8")).toContain("Starting operator"), {
      what: `${p.identity} started`,
    });

  /** Every managed object reconciled by the operator now leading (the annotation's echo), every object settled. */
  async function reconciledBy(request: string): Promise<void> {
    for (const { type, name, managed } of fleet)
      if (managed)
        await stack.kubectl([
          "annotate",
          "--overwrite",
          `${type.plural}.mds.dev/${name}`,
          `mds.dev/reconcile-requested-at=${request}`,
        ]);
    for (const { type, name, managed } of fleet)
      await eventually(
        async () => {
          const obj = await getObj(stack, type, name);
          if (managed) expect(obj?.status?.["lastHandledReconcileAt"]).toBe(request);
          expect(settled(counterpart, type, obj)).toBe(true);
        },
        { what: `${type.kind} ${name} reconciled (${request})`, timeoutMs: 60_000 },
      );
  }

  /** The promises of a roll, from `before` to now, over a window that started `startedAt`. */
  async function expectCarriedOver(startedAt: number): Promise<void> {
    const after = await snapshot(stack);
    expect(after.remote).toEqual(before.remote);
    expect(after.secrets).toEqual(before.secrets);
    expect(comparableStatus(before, after)).toEqual(before.status);
    const stats = proxy.stats();
    // Nothing written at the service: no create, delete, restore, backup, mint or rotation.
    expect(Object.keys(stats.byRoute).filter((route) => !route.startsWith("GET "))).toEqual([]);
    const n = before.remote.projects.length + before.remote.databases.length;
    const resyncs = 1 + Math.floor((Date.now() - startedAt) / pollSlowMs);
    expect(stats.total, JSON.stringify(stats.byRoute)).toBeLessThanOrEqual((Math.ceil(n / 100) + 5) * resyncs);
  }

  /** A release's CRDs, applied as the stack applied them (client-side on devkube, server-side on a real cluster). */
  const applyCrds = (crdsDir: string) => stack.applyCrds(crdsDir);

  const storedVersions = async () =>
    Object.fromEntries(
      (await stack.kube.list<KubeObject & { status?: { storedVersions?: string[] } }>(CrdType)).items
        .filter((c) => c.metadata.name.endsWith(".mds.dev"))
        .map((c) => [c.metadata.name, c.status?.storedVersions]),
    );
  const kubeconfigArgs = () => [
    "--kubeconfig",
    stack.devkube?.kubeconfigPath ?? real!.kubeconfigPath,
    ...(real?.context === undefined ? [] : ["--context", real.context]),
  ];

  const crdVersions = async () =>
    Object.fromEntries(
      (await stack.kube.list<KubeObject>(CrdType)).items
        .filter((c) => c.metadata.name.endsWith(".mds.dev"))
        .map((c) => [c.metadata.name, c.metadata.annotations?.[crdVersionAnnotation] ?? previous.version]),
    );

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "mds-upgrade-"));
    tree = await buildPreviousRelease(dir);
    // The previous release as installed: its CRDs (v1alpha1 alone, no conversion), its operator.
    stack = await startStack({ api: counterpart, crdsDir: path.join(tree, "crds") });
    expect(Object.values(await crdVersions())).toEqual(fleetKinds().map(() => previous.version));
    proxy = await startFaultProxy({ target: stack.emulator?.url ?? stack.service.url });
    const old = startOperator(tree, "previous-1");
    await waitLeader(old.identity);
    await applyFleet(stack, counterpart);
    await reconciledBy("installed");
    before = await snapshot(stack);
  }, 300_000);

  afterAll(async () => {
    for (const p of operators) if (p.child.exitCode === null && p.child.signalCode === null) await stopOperator(p);
    for (const p of operators) stack?.logs.push(await readFile(p.logFile, "utf8").catch(() => ""));
    await applyCrds(path.join(repoRoot, "crds")).catch(() => {});
    const leaks = stack === undefined ? "" : await stack.leaks();
    await proxy?.stop();
    await stack?.stop();
    await rm(dir, { recursive: true, force: true });
    expect(leaks).toBe("");
  });

  it(`rolls ${previous.version} to this tree: both run for a moment, the Lease passes, nothing remote changes`, async () => {
    const old = operators[0]!;
    proxy.resetStats();
    const startedAt = Date.now();
    // docs/upgrade.md's order: the CRDs (v1beta1 stored, v1alpha1 converted by the webhook, already running and
    // injecting its CA into them), then the operator.
    await applyCrds(path.join(repoRoot, "crds"));
    if (real === undefined) await caBundlesInjected(stack.devkube!.kubeconfigPath);
    const next = startOperator(repoRoot, "next-1");
    await waitStarted(next);
    expect(await leader()).toBe(old.identity);
    await stopOperator(old);
    await waitLeader(next.identity);
    await reconciledBy("upgraded");
    await expectCarriedOver(startedAt);
    expect(Object.values(await crdVersions())).toEqual(fleetKinds().map(() => version));
  }, 180_000);

  it("migrate-storage rewrites every object in v1beta1: storedVersions drops v1alpha1, nothing else changes", async () => {
    expect(Object.values(await storedVersions())).toEqual(fleetKinds().map(() => ["v1alpha1", "v1beta1"]));
    proxy.resetStats();
    const startedAt = Date.now();
    const log = vi.spyOn(console, "log").mockImplementation(() => undefined);
    try {
      expect(await main(["migrate-storage", "--per-second", "200", ...kubeconfigArgs()])).toBe(0);
    } finally {
      log.mockRestore();
    }
    expect(Object.values(await storedVersions())).toEqual(fleetKinds().map(() => ["v1beta1"]));
    await reconciledBy("migrated");
    await expectCarriedOver(startedAt);
  }, 180_000);

  it(`rolls the operator back to ${previous.version} under this tree's CRDs, with the same promises`, async () => {
    const next = operators.find((p) => p.identity === "next-1")!;
    // What docs/upgrade.md has the user run first: nothing this tree writes needs clearing for 0.1.0.
    const log = vi.spyOn(console, "log").mockImplementation(() => undefined);
    const kubeconfig = stack.devkube?.kubeconfigPath ?? real!.kubeconfigPath;
    try {
      const args = ["prepare-rollback", "--to", previous.version, "--dry-run", "--kubeconfig", kubeconfig];
      expect(await main([...args, ...(real?.context === undefined ? [] : ["--context", real.context])])).toBe(0);
      expect(log.mock.calls.at(-1)?.[0]).toMatch(/^mds prepare-rollback: 0 resource\(s\) would change/);
    } finally {
      log.mockRestore();
    }
    proxy.resetStats();
    const startedAt = Date.now();
    const back = startOperator(tree, "previous-2");
    await waitStarted(back);
    expect(await leader()).toBe(next.identity);
    await stopOperator(next);
    await waitLeader(back.identity);
    await reconciledBy("rolled-back");
    await expectCarriedOver(startedAt);
    // The CRDs stay this tree's.
    expect(Object.values(await crdVersions())).toEqual(fleetKinds().map(() => version));
  }, 180_000);

  it(`finishes, in this tree, a rotation that a crashed ${previous.version} left pending`, async () => {
    const back = operators.find((p) => p.identity === "previous-2")!;
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests({
        apiVersion: "mds.dev/v1alpha1",
        kind: "Database",
        metadata: { name: "rotating", namespace: stack.namespace },
        spec: { projectRef: { name: "shop" } },
      }),
    );
    const rotating = () => getObj(stack, DatabaseType, "rotating");
    await eventually(async () => expect(settled(counterpart, DatabaseType, await rotating())).toBe(true), {
      what: "rotating Ready",
    });
    const secretName = (await rotating())?.status?.["secretName"] as string;
    const secretBefore = (await stack.kube.get<Secret>(SecretType, stack.namespace, secretName))!;
    const others = (await snapshot(stack)).secrets;
    delete others[secretName];
    // 0.1.0 mints the rotation's connection, records it as pending, and dies before writing the Secret.
    await stopOperator(back);
    const crashing = startOperator(tree, "previous-crash", { MDS_CRASH_POINT: "database:after-rotate-mint" });
    await waitLeader(crashing.identity);
    await stack.kubectl(["annotate", "databases.mds.dev/rotating", "mds.dev/rotate=first"]);
    await crashing.exited;
    const pending = (await rotating())?.status?.["rotation"] as { pending?: unknown } | undefined;
    expect(pending?.pending).toBeDefined();
    expect((await stack.kube.get<Secret>(SecretType, stack.namespace, secretName))?.metadata.resourceVersion).toBe(
      secretBefore.metadata.resourceVersion,
    );
    const remote = (await snapshot(stack)).remote;
    // This tree takes over (once the dead leader's Lease expires) and finishes it: the Secret rotated once, nothing
    // else rewritten, nothing created or deleted at the service.
    const next = startOperator(repoRoot, "next-2");
    await waitLeader(next.identity);
    await eventually(
      async () => {
        const obj = await rotating();
        expect((obj?.status?.["rotation"] as { pending?: unknown } | undefined)?.pending).toBeUndefined();
        expect(settled(counterpart, DatabaseType, obj)).toBe(true);
      },
      { what: "the rotation finished by this tree", timeoutMs: 60_000 },
    );
    const secretAfter = (await stack.kube.get<Secret>(SecretType, stack.namespace, secretName))!;
    expect(secretAfter.data?.["DATABASE_URL"]).not.toBe(secretBefore.data?.["DATABASE_URL"]);
    const after = await snapshot(stack);
    expect(after.remote).toEqual(remote);
    delete after.secrets[secretName];
    expect(after.secrets).toEqual(others);
  }, 180_000);
});

const fleetKinds = () => [...new Set(fleet.map((f) => f.type.plural))];
