import pino from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { DatabaseType, ProjectType } from "../resources/types.ts";
import { createMetricsRegistry } from "../operator/metrics.ts";
import { createFakeKube, unreachableKubeConfig } from "../../test/support/fake-kube.ts";
import { createOperatorWithKinds } from "./operator.ts";

// At 10,000 Databases a scrape of /metrics unpacked every cached object twice (the resources' conditions, and the
// backup-age gauge's Databases): seconds of one synchronous loop per scrape, during which the Lease could not be
// renewed (bench/operator-rss.ts --restart lost its lease 13 s after the start). The scrape now reads what the
// informers' events left. Counted in unpacked objects (each is one JSON.parse), not in milliseconds.

const n = 10_000;
// Nothing listens there: the informers list through the fake client; their watches fail and back off.
const kubeConfig = unreachableKubeConfig();

const stops: (() => Promise<void>)[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const stop of stops.splice(0)) await stop();
});

describe("the operator at 10,000 Databases", () => {
  it("answers a scrape without unpacking its cached objects", async () => {
    const kube = createFakeKube();
    kube.put(ProjectType, {
      apiVersion: "mds.dev/v1alpha1",
      kind: "Project",
      metadata: { name: "p", namespace: "team-0" },
      spec: { displayName: "p" },
    });
    const at = "2026-11-26T07:00:00Z";
    for (let i = 0; i < n; i++) {
      kube.put(DatabaseType, {
        apiVersion: "mds.dev/v1alpha1",
        kind: "Database",
        metadata: { name: `db-${i}`, namespace: `team-${i % 100}`, creationTimestamp: at },
        // One opts in to the backup-age gauge: it alone has a series.
        spec: { projectRef: { name: "p" }, ...(i === 7 ? { trackLatestBackup: true } : {}) },
        status: {
          id: `db_${i}`,
          conditions: [
            { type: "Ready", status: "True", reason: "Available", message: "", lastTransitionTime: at },
            { type: "Synced", status: "True", reason: "ReconcileSuccess", message: "", lastTransitionTime: at },
          ],
        },
      });
    }
    const registry = createMetricsRegistry();
    const operator = createOperatorWithKinds({
      kubeConfig,
      kube,
      apiUrl: "http://127.0.0.1:9",
      defaultCredentials: { secretNamespace: "mds-system", secretName: "mds-credentials", key: "token" },
      namespaces: undefined,
      instanceId: "scale",
      concurrency: 4,
      pollIntervals: { fastMs: 1_000, slowMs: 300_000 },
      logger: pino({ level: "silent" }),
      metrics: registry,
      // A standby: nothing is reconciled, only cached.
      canWrite: () => false,
    });
    stops.push(() => operator.stop());
    await operator.start();

    const parse = vi.spyOn(JSON, "parse");
    const text = await registry.metrics();
    expect(parse.mock.calls.length).toBeLessThan(100); // 20,000 before: every Database unpacked twice
    expect(text).toContain(
      `mds_operator_resource_conditions{kind="Database",type="Ready",status="True",reason="Available"} ${n}`,
    );
    expect(text.split("\n").filter((l) => l.startsWith("mds_database_backup_age_seconds{"))).toEqual([
      expect.stringMatching(/^mds_database_backup_age_seconds\{[^}]*"team-7"[^}]*"db-7"[^}]*\} \d/),
    ]);
  }, 120_000);
});
