import { describe, expect, it, vi } from "vitest";
import { Writable } from "node:stream";
import { parseKubeConfig } from "../kube/kubeconfig.ts";
import { parseOperatorConfig } from "./operator-config.ts";
import { parseOptionDuration } from "../resources/kit/settings.ts";
import { createLogger, crashPointFromEnv, queueOrderFromEnv, startOperatorRuntime } from "./operator.ts";
import type { RuntimeOperatorOptions } from "./operator.ts";
import type { LeaseClient, LeaseRecord } from "../operator/leader-election.ts";
import { createKubeClient } from "../kube/client.ts";
import { SecretType } from "../kube/types.ts";
import { mdsVersion as version } from "../operator/build-info.ts";

const env = { MDS_API_URL: "http://127.0.0.1:9999" };

describe("mds operator configuration", () => {
  it("has defaults for everything but the API URL", () => {
    expect(parseOperatorConfig([], env)).toEqual({
      apiUrl: "http://127.0.0.1:9999",
      credentialsSecret: { namespace: "mds-system", name: "mds-credentials" },
      credentialsKey: "token",
      instanceId: "default",
      concurrency: 4,
      pollFast: 1000,
      pollSlow: 300_000,
      leaderElect: true,
      leaseName: "mds-operator",
      metricsAddress: ":8080",
      logLevel: "info",
      rotationConsumers: false,
      kindSettings: {},
    });
  });

  it("follows rotation consumers only when asked (--rotation-consumers, MDS_ROTATION_CONSUMERS)", () => {
    const env = { MDS_API_URL: "http://api" };
    expect(parseOperatorConfig(["--rotation-consumers"], env)).toMatchObject({ rotationConsumers: true });
    expect(parseOperatorConfig([], { ...env, MDS_ROTATION_CONSUMERS: "true" })).toMatchObject({
      rotationConsumers: true,
    });
    expect(() => parseOperatorConfig([], { ...env, MDS_ROTATION_CONSUMERS: "maybe" })).toThrow(
      /MDS_ROTATION_CONSUMERS/,
    );
  });

  it("reads flags before the environment", () => {
    const config = parseOperatorConfig(
      [
        "--api-url",
        "https://api.example",
        "--namespaces",
        "a, b",
        "--no-leader-elect",
        "--poll-fast",
        "500ms",
        "--concurrency",
        "8",
      ],
      {
        ...env,
        MDS_WATCH_NAMESPACES: "c",
        MDS_POLL_SLOW: "10m",
        MDS_CREDENTIALS_SECRET: "ops/token",
        MDS_LEADER_ELECT: "true",
      },
    );
    expect(config).toMatchObject({
      apiUrl: "https://api.example",
      namespaces: ["a", "b"],
      leaderElect: false,
      pollFast: 500,
      pollSlow: 600_000,
      concurrency: 8,
      credentialsSecret: { namespace: "ops", name: "token" },
    });
  });

  it("accepts client-go and controller-runtime spellings", () => {
    expect(parseOperatorConfig(["--leader-elect=false", "--leader-election-namespace=ops"], env)).toMatchObject({
      leaderElect: false,
      leaseNamespace: "ops",
    });
    expect(parseOperatorConfig(["--leader-elect=true"], env)).toMatchObject({ leaderElect: true });
  });

  it("refuses bad values with a message naming the flag and the variable", () => {
    expect(() => parseOperatorConfig([], {})).toThrow("--api-url (MDS_API_URL): is required");
    expect(() => parseOperatorConfig(["--concurrency", "0"], env)).toThrow("--concurrency (MDS_CONCURRENCY)");
    expect(() => parseOperatorConfig([], { ...env, MDS_POLL_SLOW: "soon" })).toThrow(
      '--poll-slow (MDS_POLL_SLOW): expected a duration like 1s or 5m between 1000 ms and 86400 s, got "soon"',
    );
    expect(() => parseOperatorConfig(["--credentials-secret", "nonamespace"], env)).toThrow(
      'expected <namespace>/<name> of a Secret, got "nonamespace"',
    );
    expect(() => parseOperatorConfig(["--log-level", "loud"], env)).toThrow("--log-level (MDS_LOG_LEVEL)");
    expect(() => parseOperatorConfig(["--bogus"], env)).toThrow("Unknown option '--bogus'");
    expect(() => parseOperatorConfig([], { ...env, MDS_LEADER_ELECT: "maybe" })).toThrow(
      'expected true or false, got "maybe"',
    );
  });

  it("reads the API rate budget and the kinds' replay windows, leaving the defaults to the client and the kinds", () => {
    expect(
      parseOperatorConfig(["--api-rate", "50", "--api-burst", "100", "--restore-replay-window", "1h"], env),
    ).toMatchObject({
      apiRate: 50,
      apiBurst: 100,
      kindSettings: { DatabaseRestore: { replayWindowMs: 3_600_000 } },
    });
    expect(
      parseOperatorConfig([], {
        ...env,
        MDS_API_RATE: "2.5",
        MDS_API_BURST: "5",
        MDS_RESTORE_REPLAY_WINDOW: "0",
        MDS_BACKUP_REPLAY_WINDOW: "1h30m",
      }),
    ).toMatchObject({
      apiRate: 2.5,
      apiBurst: 5,
      kindSettings: { DatabaseRestore: { replayWindowMs: 0 }, DatabaseBackup: { replayWindowMs: 5_400_000 } },
    });
    expect(parseOperatorConfig(["--api-rate", "30"], { ...env, MDS_API_RATE: "5" })).toMatchObject({ apiRate: 30 });
    const defaults = parseOperatorConfig([], env);
    expect(defaults).not.toHaveProperty("apiRate");
    expect(defaults).not.toHaveProperty("apiBurst");
    expect(defaults).toMatchObject({ kindSettings: {} });
  });

  it("refuses a bad rate budget or a replay window beyond the service's 24 h", () => {
    expect(() => parseOperatorConfig(["--api-rate", "0"], env)).toThrow(
      "--api-rate (MDS_API_RATE): expected more than 0 requests per second",
    );
    expect(() => parseOperatorConfig([], { ...env, MDS_API_RATE: "fast" })).toThrow("--api-rate (MDS_API_RATE)");
    expect(() => parseOperatorConfig(["--api-burst", "1.5"], env)).toThrow(
      "--api-burst (MDS_API_BURST): expected a whole number of requests",
    );
    expect(() => parseOperatorConfig(["--api-burst", "0"], env)).toThrow("--api-burst (MDS_API_BURST)");
    expect(() => parseOperatorConfig(["--restore-replay-window", "25h"], env)).toThrow(
      '--restore-replay-window (MDS_RESTORE_REPLAY_WINDOW): expected a duration like 1s or 5m between 0 ms and 86400 s, got "25h"',
    );
    // A kind's bad setting and an option's are reported together.
    expect(() => parseOperatorConfig(["--api-burst", "0"], { ...env, MDS_BACKUP_REPLAY_WINDOW: "soon" })).toThrow(
      /--api-burst \(MDS_API_BURST\): .*; --backup-replay-window \(MDS_BACKUP_REPLAY_WINDOW\): expected a duration/,
    );
  });

  it("parses durations as the specs write them, or plain milliseconds", () => {
    expect(["250ms", "2s", "5m", "1h", "1h30m", "75", " 3s "].map(parseOptionDuration)).toEqual([
      250, 2000, 300_000, 3_600_000, 5_400_000, 75, 3000,
    ]);
    expect(["5 minutes", "", "-1s", "1d"].map(parseOptionDuration)).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
  });
});

describe("operator runtime", () => {
  it("passes the configuration to createOperator, serves health and metrics, and never logs the token", async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    const logger = createLogger("debug", sink);
    const kubeConfig = parseKubeConfig(
      JSON.stringify({
        clusters: [{ name: "c", cluster: { server: "https://127.0.0.1:1" } }],
        users: [{ name: "u", user: { token: "planted-kube-token-9f8e" } }],
        contexts: [{ name: "x", context: { cluster: "c", user: "u" } }],
        "current-context": "x",
      }),
    );
    let received: RuntimeOperatorOptions | undefined;
    let ready = false;
    const config = parseOperatorConfig(
      ["--no-leader-elect", "--metrics-address", "127.0.0.1:0", "--instance-id", "ci"],
      env,
    );
    if (config === "help") throw new Error("unexpected help");
    const runtime = await startOperatorRuntime(config, {
      kubeConfig,
      logger,
      identity: "test",
      createOperator: (options) => {
        received = options;
        return {
          start: async () => {
            ready = true;
            // One request to the API server that never answers: rest_client_requests_total counts it as <error>.
            await createKubeClient(options.kubeConfig)
              .get(SecretType, "default", "x")
              .catch(() => undefined);
            options.logger.info({ token: "planted-api-token-1a2b", data: { PGPASSWORD: "x" } }, "reconciled");
            // The accelerate URL carries its endpoint's secret; the registry declares it (connectionSecretKeys).
            options.logger.info({ rendered: { ACCELERATE_URL: "planted-accelerate-url-7c6d" } }, "rendered");
          },
          stop: async () => {
            ready = false;
          },
          isReady: () => ready,
        };
      },
    });
    expect(received).toMatchObject({
      apiUrl: "http://127.0.0.1:9999",
      instanceId: "ci",
      namespaces: undefined,
      concurrency: 4,
      pollIntervals: { fastMs: 1000, slowMs: 300_000 },
      defaultCredentials: { secretNamespace: "mds-system", secretName: "mds-credentials", key: "token" },
    });
    expect(received?.canWrite()).toBe(true);
    const readyz = await fetch(`${runtime.healthUrl}/readyz`);
    expect([readyz.status, await readyz.text()]).toEqual([200, "ok: leader election disabled\n"]);
    const metrics = await (await fetch(`${runtime.healthUrl}/metrics`)).text();
    expect(metrics).toContain("mds_operator_leader 1");
    expect(metrics).toMatch(
      new RegExp(`mds_build_info\\{version="${version()}",commit="([0-9a-f]{7,64}|unknown)"\\} 1`),
    );
    expect(metrics).toContain('rest_client_requests_total{code="<error>",method="GET",host="127.0.0.1:1"} 1');
    // Without leader election client-go reports no leader_election_master_status series; nor do we.
    expect(metrics).not.toMatch(/^leader_election_master_status\{/m);
    expect(metrics).toMatch(/^process_cpu_seconds_total \d/m);
    await runtime.stop();
    const out = lines.join("");
    expect(out).toContain("reconciled");
    expect(out).not.toContain("planted-api-token-1a2b");
    expect(out).not.toContain("planted-kube-token-9f8e");
    expect(out).toContain("rendered");
    expect(out).not.toContain("planted-accelerate-url-7c6d");
    expect(out).not.toContain("PGPASSWORD");
  });
});

describe("operator runtime options", () => {
  it("passes --api-rate/--api-burst as apiRateLimit (the other half defaulting to the client's) and the replay window", async () => {
    const kubeConfig = parseKubeConfig(
      JSON.stringify({
        clusters: [{ name: "c", cluster: { server: "https://127.0.0.1:1" } }],
        users: [{ name: "u", user: { token: "t" } }],
        contexts: [{ name: "x", context: { cluster: "c", user: "u" } }],
        "current-context": "x",
      }),
    );
    const received: RuntimeOperatorOptions[] = [];
    const start = async (argv: string[]) => {
      const config = parseOperatorConfig(["--no-leader-elect", "--metrics-address", "off", ...argv], env);
      if (config === "help") throw new Error("unexpected help");
      const runtime = await startOperatorRuntime(config, {
        kubeConfig,
        logger: createLogger("silent"),
        identity: "test",
        createOperator: (options) => {
          received.push(options);
          return { start: async () => {}, stop: async () => {}, isReady: () => true };
        },
      });
      await runtime.stop();
    };
    await start(["--api-rate", "40", "--restore-replay-window", "2h"]);
    await start(["--api-burst", "200"]);
    await start([]);
    expect(received[0]).toMatchObject({
      apiRateLimit: { requestsPerSecond: 40, burst: 20 },
      kindSettings: { DatabaseRestore: { replayWindowMs: 7_200_000 } },
    });
    expect(received[1]).toMatchObject({ apiRateLimit: { requestsPerSecond: 10, burst: 200 } });
    expect(received[1]).not.toHaveProperty("kindSettings");
    expect(received[2]).not.toHaveProperty("apiRateLimit");
  });
});

describe("operator runtime with leader election", () => {
  it("writes only while leading, and reports a lost lease so the process exits", async () => {
    vi.useFakeTimers();
    try {
      let stored: { record: LeaseRecord; resourceVersion: string } | undefined;
      const broken = { now: false };
      const lease: LeaseClient = {
        description: "mds-system/mds-operator",
        get: async () => {
          if (broken.now) throw new Error("apiserver unreachable");
          return stored;
        },
        create: async (record) => {
          stored = { record, resourceVersion: "1" };
        },
        update: async (record, rv) => {
          if (broken.now) throw new Error("apiserver unreachable");
          stored = { record, resourceVersion: String(Number(rv) + 1) };
        },
      };
      let canWrite: (() => boolean) | undefined;
      const config = parseOperatorConfig(["--metrics-address", "off"], env);
      if (config === "help") throw new Error("unexpected help");
      const runtime = await startOperatorRuntime(config, {
        kubeConfig: parseKubeConfig(
          '{"clusters":[{"name":"c","cluster":{"server":"https://127.0.0.1:1"}}],"contexts":[{"name":"x","context":{"cluster":"c"}}],"current-context":"x"}',
        ),
        logger: createLogger("silent"),
        identity: "replica-a",
        leaseClient: lease,
        createOperator: (options) => {
          canWrite = options.canWrite;
          return { start: async () => undefined, stop: async () => undefined, isReady: () => true };
        },
      });
      let lost = false;
      void runtime.lost.then(() => (lost = true));
      await vi.advanceTimersByTimeAsync(100);
      expect(canWrite?.()).toBe(true);
      expect(stored?.record.holderIdentity).toBe("replica-a");
      broken.now = true;
      await vi.advanceTimersByTimeAsync(10_500);
      expect(canWrite?.()).toBe(false);
      expect(lost).toBe(true);
      await runtime.stop();
    } finally {
      vi.useRealTimers();
    }
  });
});

describe("MDS_CRASH_POINT", () => {
  it("kills at the count-th arrival at a named point only", () => {
    const kills: string[] = [];
    const point = crashPointFromEnv("database:after-create:2", () => kills.push("killed"));
    point?.("database:after-secret");
    point?.("database:after-create");
    expect(kills).toEqual([]);
    point?.("database:after-create");
    expect(kills).toEqual(["killed"]);
    expect(crashPointFromEnv(undefined, () => undefined)).toBeUndefined();
    expect(crashPointFromEnv(" ", () => undefined)).toBeUndefined();
  });

  it("arms several points at once: the first one reached kills", () => {
    const kills: string[] = [];
    const point = crashPointFromEnv("project:after-secret:1, database:after-create", () => kills.push("killed"));
    point?.("project:after-create");
    point?.("database:after-create");
    expect(kills).toEqual(["killed"]);
  });

  it("refuses a name that is not a crash point, instead of never firing", () => {
    expect(() => crashPointFromEnv("database:after-creat", () => undefined)).toThrow(
      /unknown crash point "database:after-creat"/,
    );
  });
});

describe("MDS_QUEUE_ORDER", () => {
  it("is namespaces in turn unless a benchmark asks for fifo, and refuses anything else", () => {
    expect(queueOrderFromEnv(undefined)).toBe("namespaces");
    expect(queueOrderFromEnv("")).toBe("namespaces");
    expect(queueOrderFromEnv("fifo")).toBe("fifo");
    expect(() => queueOrderFromEnv("FIFO")).toThrow(/MDS_QUEUE_ORDER: "FIFO" is neither/);
  });
});
