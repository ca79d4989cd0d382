import { readFile } from "node:fs/promises";
import pg from "pg";
import {
  checkInvariants,
  collectSecretValues,
  mdsApiVersion,
  type InvariantContext,
  type Violation,
} from "./invariants.ts";
import { crashPoints } from "../../../src/resources/index.ts";
import {
  armValue,
  crashPointsForStep,
  reachableTogether,
  reachedCrashPoint,
  stepOf,
  type ChaosStep,
} from "./crash-points.ts";
import { seededRandom, type FaultSchedule } from "../fault-proxy.ts";
import { conditionOf, isReady, type KubeObject } from "../kube-objects.ts";
import type { ChaosStack, OperatorProcess } from "./stack.ts";
import type { OperatorRelease, Releases } from "./versions.ts";

// Chaos iterations: each runs one resource lifecycle (create, update, Secret rebuild, restore,
// delete) on the local stack while the operator is SIGKILLed at named crash points and at random
// moments, the API misbehaves through the fault proxy, watches are cut and, with two replicas, the
// leader is killed. After each iteration the invariants are checked from the outside.

export interface ChaosOptions {
  iterations: number;
  seed: number;
  /** Per step; a step that does not converge in time is a violation. */
  stepTimeoutMs?: number;
  /** Crash points armed per step, a seeded choice among the step's (default: all of them). */
  crashesPerStep?: number;
  /** Leave the API alone (no fault schedule) - for a first smoke run. */
  faults?: boolean;
  log?: (line: string) => void;
  /** Operator replicas: 1, 2 (leader election), or seeded "random" (30 % two). */
  replicas?: 1 | 2 | "random";
  /** Steps that get crash points armed (default all); the others still get random kills and faults. */
  crashSteps?: ChaosStep[];
  /** Epoch ms after which no new iteration starts. */
  deadline?: number;
  /** The lifecycle steps to run, in order (default all five). */
  steps?: ChaosStep[];
  /**
   * Upgrade mode: the operator alternates between these two versions, at every restart of a slot (so each crash is
   * followed by the other version) and at the start of each iteration (even ones start on the previous release).
   */
  releases?: Releases;
}

export interface IterationResult {
  iteration: number;
  replicas: number;
  crashPoints: number;
  crashPointsNotReached: number;
  randomKills: number;
  watchDrops: number;
  outages: number;
  apiFaults: number;
  seconds: number;
  violations: Violation[];
  /** Upgrade mode: operator starts by version. */
  launches?: Record<string, number>;
  /**
   * Upgrade mode: crash points hit by one version whose slot restarted on the other, `<from> -> <to>` → count. With
   * one replica that restart is the recovery; with two the standby may recover first, on either version.
   */
  handovers?: Record<string, number>;
}

export interface ChaosReport {
  iterations: IterationResult[];
  crashes: number;
  violations: number;
  crashPointsHit: Record<string, number>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

class Timeout extends Error {}

async function waitFor<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined | false>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline)
      throw new Timeout(
        `${what} did not happen within ${timeoutMs / 1000} s${last instanceof Error ? ` (last error: ${last.message})` : ""}`,
      );
    await sleep(150);
  }
}

function shuffle<T>(items: T[], random: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

/**
 * Keeps `replicas` operator processes running the way a Deployment would, restarting whatever
 * dies. Every start arms all crash points still queued; the one a process dies at leaves the queue, so a step
 * is crashed at each of its points in the order it reaches them. With `versions`, every restart of a slot runs the
 * other version (an upgrade or a rollback after every crash), armed with the queued points that version knows.
 */
class Supervisor {
  private readonly stack: ChaosStack;
  private readonly replicas: number;
  private readonly versions: { releases: Releases; first: OperatorRelease } | undefined;
  private readonly processes = new Map<string, OperatorProcess>();
  private readonly releaseOf = new Map<string, OperatorRelease>();
  private queue: string[] = [];
  private stopped = false;
  private generation = 0;
  private broken: Error | undefined;
  crashPointHits: string[] = [];
  /** Exits nobody asked for (no crash point armed, no harness signal): a broken operator, not chaos. */
  unexpectedExits: Array<{ code: number | null; signal: NodeJS.Signals | null; logFile: string }> = [];
  randomKills = 0;
  /** Operator starts by version. */
  launches: Record<string, number> = {};
  /** Crash points hit by one version whose slot then ran the other: `<from> -> <to>` → count. */
  handovers: Record<string, number> = {};

  constructor(stack: ChaosStack, replicas: number, versions?: { releases: Releases; first: OperatorRelease }) {
    this.stack = stack;
    this.replicas = replicas;
    this.versions = versions;
  }

  async start(): Promise<void> {
    for (let r = 0; r < this.replicas; r++) await this.launch(`r${r}`);
  }

  /** The version a slot runs next: the first one (the other for a second replica, as in a roll), then alternating. */
  private nextRelease(slot: string): OperatorRelease | undefined {
    if (this.versions === undefined) return undefined;
    const { releases, first } = this.versions;
    const other = (r: OperatorRelease) => (r === releases.previous ? releases.current : releases.previous);
    const last = this.releaseOf.get(slot);
    return last !== undefined ? other(last) : slot === "r0" ? first : other(first);
  }

  private async launch(slot: string, crashedAt?: string): Promise<void> {
    if (this.stopped) return;
    const release = this.nextRelease(slot);
    const last = this.releaseOf.get(slot);
    if (release !== undefined) {
      try {
        await this.versions?.releases.use(release);
      } catch (error) {
        this.broken = error instanceof Error ? error : new Error(String(error));
        return;
      }
      if (this.stopped) return;
      this.releaseOf.set(slot, release);
      this.launches[release.version] = (this.launches[release.version] ?? 0) + 1;
      if (crashedAt !== undefined && last !== undefined && last !== release) {
        const key = `${last.version} -> ${release.version}`;
        this.handovers[key] = (this.handovers[key] ?? 0) + 1;
      }
    }
    const points = release === undefined ? this.queue : this.queue.filter((p) => release.crashPoints.has(p));
    const armed = points.length > 0;
    const proc = this.stack.startOperator({
      // The version in the name, so the log files say which version each process ran.
      identity: `chaos-${slot}-${++this.generation}${release === undefined ? "" : `-${release.version}`}`,
      leaderElect: this.replicas > 1,
      ...(armed ? { crashPoint: armValue(points) } : {}),
      ...(release === undefined ? {} : { entry: release.entry }),
    });
    this.processes.set(slot, proc);
    void proc.exited.then(async ({ code, signal }) => {
      if (this.processes.get(slot) !== proc) return;
      const point =
        armed && signal === "SIGKILL" && !proc.signalled ? await reachedCrashPoint(proc.logFile) : undefined;
      if (point !== undefined) {
        this.crashPointHits.push(point);
        this.queue = this.queue.filter((p) => p !== point);
      } else if (!proc.signalled && !this.stopped && !(this.replicas > 1 && code === 1)) {
        this.unexpectedExits.push({ code, signal, logFile: proc.logFile });
      }
      // Exit code 1 after a lost lease is expected with two replicas; a Deployment restarts it.
      if (!this.stopped) setTimeout(() => void this.launch(slot, point), this.unexpectedExits.length > 0 ? 500 : 50);
    });
  }

  /** Re-arms: the processes are SIGKILLed (a crash too) and come back with the queued crash points. */
  async arm(points: string[]): Promise<void> {
    this.queue = [...points];
    if (points.length === 0) return;
    await this.killAll();
  }

  /** Crash points still queued when a step converged were never armed. */
  disarm(): string[] {
    const left = this.queue;
    this.queue = [];
    return left;
  }

  async killAll(): Promise<void> {
    for (const proc of this.processes.values()) {
      if (proc.alive()) {
        this.randomKills++;
        await proc.kill("SIGKILL");
      }
    }
  }

  /** Kills the current leader (or the only replica). */
  async killLeader(): Promise<boolean> {
    const holder = await this.stack.leaseHolder();
    for (const proc of this.processes.values()) {
      if (proc.alive() && (this.replicas === 1 || proc.identity === holder)) {
        this.randomKills++;
        await proc.kill("SIGKILL");
        return true;
      }
    }
    return false;
  }

  /** Rejects when the operator keeps exiting on its own (it cannot start): no point waiting for convergence. */
  failure(): Promise<never> {
    return new Promise((_resolve, reject) => {
      const check = setInterval(() => {
        if (this.stopped) return clearInterval(check);
        if (this.broken !== undefined) {
          clearInterval(check);
          reject(new Error(`cannot switch the operator's version: ${this.broken.message}`));
        } else if (this.unexpectedExits.length >= 3) {
          clearInterval(check);
          const last = this.unexpectedExits[this.unexpectedExits.length - 1];
          reject(
            new Error(
              `the operator keeps exiting by itself (last: code ${String(last?.code)}, signal ${String(last?.signal)}); see ${last?.logFile ?? "its log"}`,
            ),
          );
        }
      }, 200);
      check.unref();
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const proc of this.processes.values()) if (proc.alive()) await proc.kill("SIGTERM");
    await Promise.all([...this.processes.values()].map((p) => p.exited));
  }
}

interface IterationState {
  ns: string;
  project: string;
  database: string;
  databaseSecret: string;
  restore: string;
  /** A DatabaseBackup of the Database (the backup step). */
  backup: string;
  /** A Connection of the Database with its own Secret (rotated in the rotate step). */
  connection: string;
  databaseId?: string | undefined;
  restoreKeysByTarget: Map<string, Set<string>>;
}

async function withDatabase<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  client.on("error", () => undefined);
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function apiCall(
  stack: ChaosStack,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: unknown }> {
  // The harness talks to the service directly, not through the fault proxy: its own calls must not fail.
  const res = await fetch(stack.api.directUrl + path, {
    method,
    headers: {
      authorization: `Bearer ${stack.api.token}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text === "" ? undefined : (JSON.parse(text) as unknown) };
}

async function runStep(
  stack: ChaosStack,
  step: ChaosStep,
  s: IterationState,
  timeoutMs: number,
  note: (line: string) => void,
): Promise<void> {
  const kube = stack.kube;
  const get = (kind: string, name: string) => kube.get(mdsApiVersion, kind, s.ns, name);
  switch (step) {
    case "create": {
      await kube.apply({
        apiVersion: mdsApiVersion,
        kind: "Project",
        metadata: { name: s.project, namespace: s.ns },
        spec: {
          displayName: `chaos ${s.ns}`,
          deletionPolicy: "Delete",
          connectionSecret: { name: `${s.project}-conn`, rotation: { gracePeriod: "2s" } },
        },
      });
      await kube.apply({
        apiVersion: mdsApiVersion,
        kind: "Database",
        metadata: { name: s.database, namespace: s.ns },
        spec: {
          projectRef: { name: s.project },
          displayName: `db ${s.ns}`,
          deletionPolicy: "Delete",
          connectionSecret: { name: s.databaseSecret, rotation: { gracePeriod: "2s" } },
        },
      });
      await kube.apply({
        apiVersion: mdsApiVersion,
        kind: "Connection",
        metadata: { name: s.connection, namespace: s.ns },
        spec: {
          databaseRef: { name: s.database },
          connectionSecret: { name: `${s.connection}-conn`, rotation: { gracePeriod: "2s" } },
        },
      });
      await waitFor(
        "Project, Database and Connection Ready",
        timeoutMs,
        async () =>
          isReady(await get("Project", s.project)) &&
          isReady(await get("Database", s.database)) &&
          isReady(await get("Connection", s.connection)),
      );
      const db = await get("Database", s.database);
      s.databaseId = db?.status?.["id"] as string | undefined;
      return;
    }
    case "update": {
      const displayName = `renamed ${s.ns}`;
      const patched = await kube.mergePatch(mdsApiVersion, "Database", s.ns, s.database, { spec: { displayName } });
      const generation = patched.metadata.generation ?? 0;
      await waitFor("Database update synced", timeoutMs, async () => {
        const db = await get("Database", s.database);
        const synced = conditionOf(db, "Synced");
        if (synced?.status !== "True" || (synced.observedGeneration ?? 0) < generation || !isReady(db)) return false;
        const remote = await apiCall(stack, "GET", `/v1/databases/${s.databaseId ?? ""}`);
        return (remote.body as { data?: { name?: string } }).data?.name === displayName;
      });
      return;
    }
    case "secret": {
      // Both kinds rebuild their Secret (and reach their own crash points on the way).
      await kube.remove("v1", "Secret", s.ns, s.databaseSecret);
      await kube.remove("v1", "Secret", s.ns, `${s.project}-conn`);
      await kube.remove("v1", "Secret", s.ns, `${s.connection}-conn`);
      await waitFor("Secrets rebuilt with working credentials", timeoutMs, async () => {
        for (const [kind, name, secretName] of publishers(s)) {
          const data = await kube.secretData(s.ns, secretName);
          if (data?.["DATABASE_URL"] === undefined || !isReady(await get(kind, name))) return false;
          if (!(await withDatabase(data["DATABASE_URL"], async (c) => (await c.query("select 1")).rowCount === 1)))
            return false;
        }
        return true;
      });
      return;
    }
    case "rotate": {
      // Each Secret owner rotates once on demand; the replaced login is revoked after its grace period (2 s).
      const trigger = `${s.ns}-${Date.now().toString(36)}`;
      const before = new Map<string, string | undefined>();
      for (const [kind, name, secretName] of publishers(s)) {
        before.set(
          secretName,
          (await kube.get("v1", "Secret", s.ns, secretName))?.metadata.labels?.["mds.dev/connection-id"],
        );
        await kube.mergePatch(mdsApiVersion, kind, s.ns, name, {
          metadata: { annotations: { "mds.dev/rotate": trigger } },
        });
      }
      let why = "";
      await waitFor("Secrets rotated, the old logins retired", timeoutMs, async () => {
        for (const [kind, name, secretName] of publishers(s)) {
          const obj = await get(kind, name);
          const rotation = obj?.status?.["rotation"] as { trigger?: string; retiring?: unknown } | undefined;
          const now = (await kube.get("v1", "Secret", s.ns, secretName))?.metadata.labels?.["mds.dev/connection-id"];
          why = `${kind} ${name}: ready ${isReady(obj)}, rotation ${JSON.stringify(rotation)}, Secret's connection ${now} (was ${before.get(secretName)}), conditions ${JSON.stringify(obj?.status?.["conditions"])}`;
          if (!isReady(obj) || rotation?.trigger !== trigger || now === undefined || now === before.get(secretName))
            return false;
          if (rotation.retiring !== undefined) return false;
          const data = await kube.secretData(s.ns, secretName);
          why = `${kind} ${name}: its Secret does not connect`;
          if (
            !(await withDatabase(data?.["DATABASE_URL"] ?? "", async (c) => (await c.query("select 1")).rowCount === 1))
          )
            return false;
        }
        return true;
      }).catch((err: unknown) => Promise.reject(new Error(`${(err as Error).message}; last seen: ${why}`)));
      return;
    }
    case "restore": {
      const url = await waitFor("Database Ready with a Secret", timeoutMs, async () => {
        const data = await kube.secretData(s.ns, s.databaseSecret);
        return isReady(await get("Database", s.database)) ? data?.["DATABASE_URL"] : undefined;
      });
      await withDatabase(url, async (c) => {
        await c.query("create table if not exists chaos (v text)");
        await c.query("insert into chaos values ('before-backup')");
      });
      const backup = await apiCall(stack, "POST", `/v1/databases/${s.databaseId ?? ""}/backups`, {});
      const backupId = (backup.body as { data?: { id?: string } }).data?.id;
      if (backupId === undefined) throw new Error(`cannot take a backup: HTTP ${backup.status}`);
      await waitFor("backup completed", timeoutMs, async () => {
        const list = await apiCall(stack, "GET", `/v1/databases/${s.databaseId ?? ""}/backups`);
        return (
          ((list.body as { data?: Array<{ id: string; status: string }> }).data ?? []).find((b) => b.id === backupId)
            ?.status === "completed"
        );
      });
      await withDatabase(url, (c) => c.query("insert into chaos values ('after-backup')"));
      const key = `${s.ns}/${s.restore}`;
      if (s.databaseId !== undefined) s.restoreKeysByTarget.set(s.databaseId, new Set([key]));
      const restore: KubeObject = {
        apiVersion: mdsApiVersion,
        kind: "DatabaseRestore",
        metadata: { name: s.restore, namespace: s.ns },
        spec: {
          target: { databaseRef: { name: s.database } },
          source: { databaseRef: { name: s.database }, backupId },
        },
      };
      await kube.apply(restore);
      const phase = await waitFor("restore finished", timeoutMs, async () => {
        const r = await get("DatabaseRestore", s.restore);
        const p = r?.status?.["phase"];
        return p === "Succeeded" || p === "Failed" || p === "Skipped" ? (p as string) : undefined;
      });
      if (phase !== "Succeeded") {
        const r = await get("DatabaseRestore", s.restore);
        note(
          `restore ended ${phase} (${String(r?.status?.["reason"] ?? "")}): ${String(r?.status?.["message"] ?? "")}`,
        );
        if (phase === "Failed" && r?.status?.["reason"] === "OutcomeUnknown") return;
        throw new Error(`restore ended ${phase}, not Succeeded`);
      }
      const rows = await withDatabase(url, async (c) =>
        (await c.query<{ v: string }>("select v from chaos order by v")).rows.map((r) => r.v),
      );
      if (JSON.stringify(rows) !== JSON.stringify(["before-backup"]))
        throw new Error(`restored data is ${JSON.stringify(rows)}, expected only the backup's row`);
      // A re-applied DatabaseRestore must be Skipped and leave newer data alone.
      await withDatabase(url, (c) => c.query("insert into chaos values ('after-restore')"));
      await kube.remove(mdsApiVersion, "DatabaseRestore", s.ns, s.restore);
      await waitFor(
        "DatabaseRestore gone",
        timeoutMs,
        async () => (await get("DatabaseRestore", s.restore)) === undefined,
      );
      await kube.apply(restore);
      const again = await waitFor("re-applied restore settled", timeoutMs, async () => {
        const p = (await get("DatabaseRestore", s.restore))?.status?.["phase"];
        return p === "Succeeded" || p === "Failed" || p === "Skipped" ? (p as string) : undefined;
      });
      if (again !== "Skipped") throw new Error(`re-applied DatabaseRestore ended ${again}, expected Skipped`);
      const after = await withDatabase(url, async (c) =>
        (await c.query<{ v: string }>("select v from chaos order by v")).rows.map((r) => r.v),
      );
      if (!after.includes("after-restore"))
        throw new Error("a second restore ran: the row written after the first restore is gone");
      return;
    }
    case "backup": {
      // Exactly one backup per DatabaseBackup (our service); none requested and NotSupported against the public API.
      const listed = async () =>
        (
          (
            (await apiCall(stack, "GET", `/v1/databases/${s.databaseId ?? ""}/backups`)).body as {
              data?: { id: string }[];
            }
          ).data ?? []
        ).map((b) => b.id);
      const before = await listed();
      await kube.apply({
        apiVersion: mdsApiVersion,
        kind: "DatabaseBackup",
        metadata: { name: s.backup, namespace: s.ns },
        spec: { databaseRef: { name: s.database } },
      });
      const done = await waitFor("backup finished", timeoutMs, async () => {
        const st = (await get("DatabaseBackup", s.backup))?.status;
        const p = st?.["phase"];
        return p === "Succeeded" || p === "Failed" ? st : undefined;
      });
      const taken = (await listed()).filter((id) => !before.includes(id));
      const expected = stack.emulator === undefined ? "Succeeded" : "NotSupported";
      const got = done["phase"] === "Failed" ? String(done["reason"]) : String(done["phase"]);
      if (got === "OutcomeUnknown") {
        note(`backup ended Failed (OutcomeUnknown): ${String(done["message"] ?? "")}`);
        if (taken.length > 1) throw new Error(`a backup whose outcome is unknown took ${taken.length} backups`);
        return;
      }
      if (got !== expected) throw new Error(`backup ended ${got}, expected ${expected}`);
      const want = expected === "Succeeded" ? [String(done["backupId"])] : [];
      if (JSON.stringify(taken) !== JSON.stringify(want))
        throw new Error(
          `the DatabaseBackup took ${JSON.stringify(taken)} at the service, expected ${JSON.stringify(want)}`,
        );
      return;
    }
    case "delete": {
      await kube.remove(mdsApiVersion, "DatabaseRestore", s.ns, s.restore);
      await kube.remove(mdsApiVersion, "DatabaseBackup", s.ns, s.backup);
      await kube.remove(mdsApiVersion, "Connection", s.ns, s.connection);
      await waitFor("Connection deleted", timeoutMs, async () => (await get("Connection", s.connection)) === undefined);
      await kube.remove(mdsApiVersion, "Database", s.ns, s.database);
      await kube.remove(mdsApiVersion, "Project", s.ns, s.project);
      await waitFor(
        "resources deleted",
        timeoutMs,
        async () =>
          (await get("Database", s.database)) === undefined && (await get("Project", s.project)) === undefined,
      );
      if (s.databaseId !== undefined) {
        const remote = await apiCall(stack, "GET", `/v1/databases/${s.databaseId}`);
        if (remote.status !== 404)
          throw new Error(
            `remote database ${s.databaseId} still exists after delete with deletionPolicy Delete (HTTP ${remote.status})`,
          );
      }
      return;
    }
  }
}

const steps: ChaosStep[] = ["create", "update", "secret", "rotate", "restore", "backup", "delete"];

/** The resources that publish a connection Secret: kind, name, Secret. */
function publishers(s: IterationState): [string, string, string][] {
  return [
    ["Database", s.database, s.databaseSecret],
    ["Project", s.project, `${s.project}-conn`],
    ["Connection", s.connection, `${s.connection}-conn`],
  ];
}

/** What the invariants are checked against for one namespace; its connection Secrets' values are planted too. */
async function invariantContext(stack: ChaosStack, ns: string): Promise<InvariantContext> {
  const planted = [...stack.planted, ...(await collectSecretValues(stack.kube, [ns]).catch(() => []))];
  return {
    kube: stack.kube,
    controlUrl: stack.controlUrl,
    api: { url: stack.api.directUrl, token: stack.api.token },
    namespaces: [ns],
    instanceId: stack.instanceId,
    logFiles: stack.logFiles(),
    planted,
  };
}

export async function runChaos(stack: ChaosStack, options: ChaosOptions): Promise<ChaosReport> {
  const log = options.log ?? (() => undefined);
  const timeoutMs = options.stepTimeoutMs ?? 90_000;
  const crashesPerStep = options.crashesPerStep ?? Infinity;
  const results: IterationResult[] = [];
  const crashPointsHit: Record<string, number> = {};
  let crashes = 0;

  for (let i = 0; i < options.iterations; i++) {
    if (options.deadline !== undefined && Date.now() > options.deadline) break;
    const random = seededRandom(options.seed * 1000 + i);
    const started = Date.now();
    const ns = `chaos-${options.seed}-${i}`;
    await stack.kube.apply({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
    const s: IterationState = {
      ns,
      project: "proj",
      database: "db",
      databaseSecret: "db-conn",
      restore: "restore-1",
      backup: "backup-1",
      connection: "app",
      restoreKeysByTarget: new Map(),
    };
    const twoReplicas = random() < 0.3;
    const replicas =
      options.replicas === undefined || options.replicas === "random" ? (twoReplicas ? 2 : 1) : options.replicas;
    const releases = options.releases;
    const supervisor = new Supervisor(
      stack,
      replicas,
      releases === undefined ? undefined : { releases, first: i % 2 === 0 ? releases.previous : releases.current },
    );
    const violations: Violation[] = [];
    let watchDrops = 0;
    let outages = 0;
    let misses = 0;
    const stepSeconds: Partial<Record<ChaosStep, number>> = {};
    stack.apiProxy.resetStats();
    const schedule: FaultSchedule | undefined =
      options.faults === false
        ? undefined
        : {
            seed: options.seed * 7919 + i,
            rates: {
              "rate-limit": 0.03,
              "server-error": 0.03,
              reset: 0.02,
              slow: 0.02,
              truncate: 0.01,
              "reset-after-forward": 0.01,
            },
            retryAfterSeconds: 1,
            slowDelayMs: 300,
          };
    stack.apiProxy.setSchedule(schedule);
    try {
      await supervisor.start();
      for (const step of options.steps ?? steps) {
        const candidates =
          options.crashSteps === undefined || options.crashSteps.includes(step) ? crashPointsForStep(step) : [];
        // With two replicas every crash costs a lease failover (up to 15 s), and the standby, armed with the same
        // points, usually crashes again where the leader did when it redoes the work: one point per step keeps a
        // step within its timeout.
        const perStep = replicas > 1 ? Math.min(1, crashesPerStep) : crashesPerStep;
        const armed = shuffle(reachableTogether(candidates, random), random).slice(0, perStep);
        await supervisor.arm(armed);
        // Disruptions at seeded moments while the step runs.
        const disruptions: Promise<void>[] = [];
        const disrupt = (afterMs: number, action: () => Promise<void>) =>
          disruptions.push(
            sleep(afterMs)
              .then(action)
              .catch(() => undefined),
          );
        if (random() < 0.5) {
          // Three ways a watch ends: the connection is cut (TCP), the server ends it (as at its request timeout), or
          // the server ends it having forgotten the history, so resuming gets 410 Gone and the informer must relist.
          const how = random();
          disrupt(Math.floor(random() * 2000), async () => {
            watchDrops++;
            if (how < 0.4) stack.kubeProxy.dropConnections();
            else if (how < 0.7) stack.devkube.closeWatches();
            else {
              stack.devkube.setWatchHistoryLimit(1);
              stack.devkube.closeWatches();
              await sleep(3000);
              stack.devkube.setWatchHistoryLimit(1000);
            }
          });
        }
        if (random() < 0.3) disrupt(Math.floor(random() * 3000), async () => void (await supervisor.killLeader()));
        if (schedule !== undefined && random() < 0.15) {
          const duration = 1000 + Math.floor(random() * 3000);
          const mode = random() < 0.5 ? "refuse" : "unavailable";
          disrupt(Math.floor(random() * 2000), async () => {
            outages++;
            await stack.apiProxy.startOutage(mode, duration);
          });
        }
        const stepStarted = Date.now();
        try {
          await Promise.race([
            runStep(stack, step, s, timeoutMs, (line) => log(`  [${ns}] ${step}: ${line}`)),
            supervisor.failure(),
          ]);
        } catch (error) {
          const message = error instanceof Error ? error.message : String(error);
          violations.push({
            invariant: error instanceof Timeout && step === "delete" ? "no-stuck-finalizer" : "converged",
            detail: `${step}: ${message}`,
          });
          log(`  [${ns}] ${step}: ${message}`);
          await Promise.all(disruptions);
          misses += supervisor.disarm().length;
          break;
        }
        await Promise.all(disruptions);
        await stack.apiProxy.endOutage();
        misses += supervisor.disarm().length;
        stepSeconds[step] = Math.round((Date.now() - stepStarted) / 100) / 10;
      }
    } finally {
      stack.apiProxy.setSchedule(undefined);
      await stack.apiProxy.endOutage();
    }

    // Let the operator settle without faults, then check.
    const ctx = await invariantContext(stack, ns);
    await supervisor.stop();
    violations.push(...(await checkInvariants(ctx, { restoreKeysByTarget: s.restoreKeysByTarget })));

    for (const p of supervisor.crashPointHits) crashPointsHit[p] = (crashPointsHit[p] ?? 0) + 1;
    const injected = supervisor.crashPointHits.length + supervisor.randomKills;
    crashes += injected;
    const faults = Object.values(stack.apiProxy.stats().faults).reduce((a, b) => a + b, 0);
    const result: IterationResult = {
      iteration: i,
      replicas,
      crashPoints: supervisor.crashPointHits.length,
      crashPointsNotReached: misses,
      randomKills: supervisor.randomKills,
      watchDrops,
      outages,
      apiFaults: faults,
      seconds: Math.round((Date.now() - started) / 100) / 10,
      violations,
      ...(releases === undefined ? {} : { launches: supervisor.launches, handovers: supervisor.handovers }),
    };
    results.push(result);
    log(formatRow(result));
    if (releases !== undefined) log(`    ${versionsLine([result])}`);
    log(
      `    step seconds: ${Object.entries(stepSeconds)
        .map(([k, v]) => `${k} ${v}`)
        .join(", ")}`,
    );
    for (const v of violations) log(`    VIOLATION ${v.invariant}: ${v.detail}`);
  }
  return {
    iterations: results,
    crashes,
    violations: results.reduce((n, r) => n + r.violations.length, 0),
    crashPointsHit,
  };
}

export const tableHeader =
  "iter  replicas  crash-points  not-reached  kills  watch-drops  outages  api-faults  seconds  violations";

export function formatRow(r: IterationResult): string {
  const cells = [
    r.iteration,
    r.replicas,
    r.crashPoints,
    r.crashPointsNotReached,
    r.randomKills,
    r.watchDrops,
    r.outages,
    r.apiFaults,
    r.seconds,
    r.violations.length,
  ];
  const widths = [4, 8, 12, 11, 5, 11, 7, 10, 7, 10];
  return cells.map((c, k) => String(c).padStart(widths[k] ?? 6)).join("  ");
}

export function formatReport(report: ChaosReport): string {
  const lines = [tableHeader, ...report.iterations.map(formatRow)];
  const hits = Object.entries(report.crashPointsHit).sort();
  if (hits.length > 0) lines.push("", "crash points hit:", ...hits.map(([name, n]) => `  ${name.padEnd(40)} ${n}`));
  const violations = report.iterations.flatMap((r) =>
    r.violations.map((v) => `  iteration ${r.iteration}: ${v.invariant}: ${v.detail}`),
  );
  if (violations.length > 0) lines.push("", "violations:", ...violations);
  if (report.iterations.some((r) => r.launches !== undefined)) lines.push("", versionsLine(report.iterations));
  lines.push(
    "",
    `chaos: ${report.iterations.length} iterations, ${report.crashes} crashes injected, ${report.violations} invariant violations`,
  );
  return lines.join("\n");
}

/** Upgrade mode: operator starts by version, and crash points whose restart ran the other version, summed. */
export function versionsLine(iterations: IterationResult[]): string {
  const sum = (pick: (r: IterationResult) => Record<string, number> | undefined) => {
    const out: Record<string, number> = {};
    for (const r of iterations) for (const [k, n] of Object.entries(pick(r) ?? {})) out[k] = (out[k] ?? 0) + n;
    return Object.entries(out)
      .sort()
      .map(([k, n]) => `${k} ${n}`)
      .join(", ");
  };
  return `versions: started ${sum((r) => r.launches) || "none"}; crash points whose restart ran the other version: ${sum((r) => r.handovers) || "none"}`;
}

/** Resolves when the operator logged that it started (or after 20 s). */
async function untilStarted(logFile: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    const text = await readFile(logFile, "utf8").catch(() => "");
    if (text.includes('"msg":"Operator started"')) return;
    await sleep(50);
  }
}

export interface StormOptions {
  iterations: number;
  seed: number;
  /** Databases per iteration. */
  databases: number;
  /** SIGKILLs per phase (create, Secret rebuild, delete). */
  killsPerPhase: number;
  stepTimeoutMs?: number;
  log?: (line: string) => void;
  /** Epoch ms after which no new iteration starts. */
  deadline?: number;
}

/**
 * Crash storms: many Databases at once while the operator is SIGKILLed again and again (at armed crash
 * points with a random count, or 0–2 s after it started serving), through creation, Secret rebuild and deletion;
 * then it runs undisturbed until everything converges, and the invariants are checked. Many more crashes per
 * minute than the lifecycle iterations, on the paths where duplicates and lost credentials would come from.
 */
export async function runCrashStorm(stack: ChaosStack, options: StormOptions): Promise<ChaosReport> {
  const log = options.log ?? (() => undefined);
  const timeoutMs = options.stepTimeoutMs ?? 180_000;
  const results: IterationResult[] = [];
  const crashPointsHit: Record<string, number> = {};
  let crashes = 0;
  let launches = 0;
  const points = crashPoints().filter((p) => !["restore", "backup", "branch"].includes(stepOf(p)));

  for (let i = 0; i < options.iterations; i++) {
    if (options.deadline !== undefined && Date.now() > options.deadline) break;
    const random = seededRandom(options.seed * 1000 + i + 500_000);
    const started = Date.now();
    const ns = `storm-${options.seed}-${i}`;
    const names = Array.from({ length: options.databases }, (_, k) => `db-${k}`);
    const violations: Violation[] = [];
    let pointHits = 0;
    let kills = 0;
    let missed = 0;
    stack.apiProxy.resetStats();
    stack.apiProxy.setSchedule({
      seed: options.seed * 31 + i,
      rates: { "rate-limit": 0.02, "server-error": 0.02, reset: 0.01, "reset-after-forward": 0.01, truncate: 0.01 },
      retryAfterSeconds: 1,
    });

    /** Kills the operator `kills` times while `action` has started work; then one undisturbed run until `done`. */
    const storm = async (phase: string, done: () => Promise<boolean>) => {
      for (let k = 0; k < options.killsPerPhase; k++) {
        const point = random() < 0.5 && points.length > 0 ? points[Math.floor(random() * points.length)] : undefined;
        const count = 1 + Math.floor(random() * 3);
        const proc = stack.startOperator({
          identity: `storm-${++launches}`,
          leaderElect: false,
          ...(point === undefined ? {} : { crashPoint: `${point}:${count}` }),
        });
        // Count the delay from the moment it serves (informers synced), so the kill lands in reconcile work, not in
        // Node's start-up.
        const delay = Math.floor(random() * 2000);
        const exit = await Promise.race([
          proc.exited,
          untilStarted(proc.logFile)
            .then(() => sleep(delay))
            .then(() => undefined),
        ]);
        if (exit !== undefined) {
          if (exit.signal === "SIGKILL" && point !== undefined) {
            pointHits++;
            crashPointsHit[point] = (crashPointsHit[point] ?? 0) + 1;
          }
        } else {
          await proc.kill("SIGKILL");
          kills++;
          if (point !== undefined) missed++;
        }
        if (await done().catch(() => false)) break;
      }
      const calm = stack.startOperator({ identity: `storm-${++launches}`, leaderElect: false });
      try {
        await waitFor(`${phase} converged`, timeoutMs, done);
      } catch (error) {
        violations.push({
          invariant: phase === "delete" ? "no-stuck-finalizer" : "converged",
          detail: `${phase}: ${error instanceof Error ? error.message : String(error)}`,
        });
      } finally {
        await calm.kill("SIGTERM");
      }
    };

    const kube = stack.kube;
    const allReady = async () => {
      const list = await kube.list(mdsApiVersion, "Database", ns);
      return list.length === names.length && list.every((d) => isReady(d));
    };
    try {
      await kube.apply({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
      await kube.apply({
        apiVersion: mdsApiVersion,
        kind: "Project",
        metadata: { name: "proj", namespace: ns },
        spec: { deletionPolicy: "Delete" },
      });
      for (const name of names) {
        await kube.apply({
          apiVersion: mdsApiVersion,
          kind: "Database",
          metadata: { name, namespace: ns },
          spec: { projectRef: { name: "proj" }, deletionPolicy: "Delete", connectionSecret: { name: `${name}-conn` } },
        });
      }
      await storm("create", async () => allReady());
      for (const name of names) await kube.remove("v1", "Secret", ns, `${name}-conn`);
      await storm("secret", async () => {
        for (const name of names)
          if ((await kube.secretData(ns, `${name}-conn`))?.["DATABASE_URL"] === undefined) return false;
        return allReady();
      });
      // Check while everything exists: one remote per resource, every Secret connects.
      const ctx = await invariantContext(stack, ns);
      stack.apiProxy.setSchedule(undefined);
      violations.push(...(await checkInvariants(ctx)));
      stack.apiProxy.setSchedule({
        seed: options.seed * 37 + i,
        rates: { "rate-limit": 0.02, "server-error": 0.02, reset: 0.01 },
        retryAfterSeconds: 1,
      });
      for (const name of names) await kube.remove(mdsApiVersion, "Database", ns, name);
      await kube.remove(mdsApiVersion, "Project", ns, "proj");
      await storm(
        "delete",
        async () =>
          (await kube.list(mdsApiVersion, "Database", ns)).length === 0 &&
          (await kube.get(mdsApiVersion, "Project", ns, "proj")) === undefined,
      );
      stack.apiProxy.setSchedule(undefined);
      violations.push(...(await checkInvariants(ctx)));
    } finally {
      stack.apiProxy.setSchedule(undefined);
    }
    crashes += pointHits + kills;
    const result: IterationResult = {
      iteration: i,
      replicas: 1,
      crashPoints: pointHits,
      crashPointsNotReached: missed,
      randomKills: kills,
      watchDrops: 0,
      outages: 0,
      apiFaults: Object.values(stack.apiProxy.stats().faults).reduce((a, b) => a + b, 0),
      seconds: Math.round((Date.now() - started) / 100) / 10,
      violations,
    };
    results.push(result);
    log(formatRow(result));
    for (const v of violations) log(`    VIOLATION ${v.invariant}: ${v.detail}`);
  }
  return {
    iterations: results,
    crashes,
    violations: results.reduce((n, r) => n + r.violations.length, 0),
    crashPointsHit,
  };
}
