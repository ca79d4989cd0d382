import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Devkube } from "@mds/devkube";
import { runKubectl } from "../../../test/support/kubectl.ts";
import { startDevkubeWithCrds, type DevkubeWithCrds } from "../../../test/support/devkube-with-crds.ts";

// The generated CRDs installed the way a user installs them (kubectl apply -f crds/, with the conversion webhook they
// name) and exercised with the real kubectl: explain shows the descriptions, the apiserver refuses what the schemas
// and CEL rules refuse.

describe("CRDs on devkube with kubectl", () => {
  let dir = "";
  let kube: Devkube;
  let cluster: DevkubeWithCrds | undefined;
  const kubectl = async (args: string[], input?: string) =>
    runKubectl(kube.kubeconfigPath, args, {
      cacheDir: join(dir, "kubectl-cache"),
      ...(input === undefined ? {} : { input }),
    });
  const apply = (yaml: string) => kubectl(["apply", "-f", "-"], yaml);

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "mds-crds-"));
    cluster = await startDevkubeWithCrds({ dir: join(dir, "kube") });
    kube = cluster.devkube;
    const waited = await kubectl(["wait", "--for=condition=Established", "crd", "--all", "--timeout=30s"]);
    expect(waited.code).toBe(0);
    // kubectl's discovery cache predates the CRDs; `get` refreshes it (explain alone would not, as with a real
    // apiserver), just as a first `kubectl get mdsdb` does.
    expect((await kubectl(["get", "mdsdb"])).code).toBe(0);
  });
  afterAll(async () => {
    await cluster?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it("kubectl explain shows the field descriptions", async () => {
    const res = await kubectl(["explain", "mdsdb.spec"]);
    expect(res.stderr).toBe("");
    expect(res.stdout).toContain("KIND:       Database");
    expect(res.stdout).toContain("projectRef");
    expect(res.stdout).toContain("The remote id (proj_…) of the project.");
    const restore = await kubectl(["explain", "mdsrestore.spec.idempotencyKey"]);
    expect(restore.stdout).toContain("The restore runs at most once per key");
    const backupStatus = await kubectl(["explain", "mdsbackup.status.sizeBytes"]);
    expect(backupStatus.stdout).toContain("The backup's size in bytes, once completed.");
    const latest = await kubectl(["explain", "mdsdb.status.latestBackup"]);
    expect(latest.stdout).toContain("The newest completed backup of the database");
  });

  it("refuses a Database naming two projects, with the rule's message", async () => {
    const res = await apply(`apiVersion: mds.dev/v1beta1
kind: Database
metadata: { name: two-projects }
spec:
  projectRef: { name: shop }
  projectId: proj_c123456789012345678901234
`);
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain("exactly one of projectRef.name or projectId must be set");
  });

  it("refuses an unknown region and an unknown template variable", async () => {
    const res = await apply(`apiVersion: mds.dev/v1beta1
kind: Database
metadata: { name: bad-region }
spec:
  projectRef: { name: shop }
  region: mars-north-1
`);
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain("spec.region");
    expect(res.stderr).toContain('supported values: "us-east-1"');
    const tpl = await apply(`apiVersion: mds.dev/v1beta1
kind: Database
metadata: { name: bad-template }
spec:
  projectRef: { name: shop }
  connectionSecret: { template: { X: "{{env.HOME}}" } }
`);
    expect(tpl.code).not.toBe(0);
    expect(tpl.stderr).toContain("spec.connectionSecret.template.X");
  });

  it("applies the defaults and refuses changes to immutable fields", async () => {
    const created = await apply(`apiVersion: mds.dev/v1beta1
kind: Database
metadata: { name: orders }
spec:
  projectRef: { name: shop }
`);
    expect(created.stderr).toBe("");
    const got = await kubectl([
      "get",
      "mdsdb",
      "orders",
      "-o",
      "jsonpath={.spec.region} {.spec.deletionPolicy} {.spec.isDefault}",
    ]);
    expect(got.stdout).toBe("inherit Retain false");
    const moved = await kubectl(["patch", "mdsdb", "orders", "--type=merge", "-p", '{"spec":{"region":"eu-west-3"}}']);
    expect(moved.code).not.toBe(0);
    expect(moved.stderr).toContain("region is immutable");
    const renamed = await kubectl([
      "patch",
      "mdsdb",
      "orders",
      "--type=merge",
      "-p",
      '{"spec":{"displayName":"orders-v2"}}',
    ]);
    expect(renamed.stderr).toBe("");
  });

  it("refuses any change to a DatabaseRestore's spec", async () => {
    const created = await apply(`apiVersion: mds.dev/v1beta1
kind: DatabaseRestore
metadata: { name: r1 }
spec:
  target: { databaseRef: { name: orders } }
  source: { databaseRef: { name: orders }, latest: true }
`);
    expect(created.stderr).toBe("");
    const changed = await kubectl([
      "patch",
      "mdsrestore",
      "r1",
      "--type=merge",
      "-p",
      '{"spec":{"idempotencyKey":"again"}}',
    ]);
    expect(changed.code).not.toBe(0);
    expect(changed.stderr).toContain("spec is immutable");
    const both = await apply(`apiVersion: mds.dev/v1beta1
kind: DatabaseRestore
metadata: { name: r2 }
spec:
  target: { databaseRef: { name: orders } }
  source: { databaseRef: { name: orders }, backupId: bkp_c1234567890, latest: true }
`);
    expect(both.stderr).toContain("exactly one of source.backupId or source.latest: true must be set");
  });

  it("serves v1beta1 (stored) and v1alpha1 (deprecated, with kubectl's warning) through the webhook crds/ names", async () => {
    const applied = await apply(`apiVersion: mds.dev/v1alpha1
kind: Database
metadata: { name: legacy }
spec:
  projectRef: { name: shop }
  connectionSecret: { endpoint: direct }
`);
    expect(applied.code, applied.stderr).toBe(0);
    const warning = "Warning: mds.dev/v1alpha1 Database is deprecated; use mds.dev/v1beta1 Database";
    expect(applied.stderr).toContain(warning);
    const beta = await kubectl([
      "get",
      "databases.v1beta1.mds.dev",
      "legacy",
      "-o",
      "jsonpath={.spec.connectionSecret.endpoint}",
    ]);
    expect({ out: beta.stdout, err: beta.stderr }).toEqual({ out: "Direct", err: "" });
    const alpha = await kubectl([
      "get",
      "databases.v1alpha1.mds.dev",
      "legacy",
      "-o",
      "jsonpath={.spec.connectionSecret.endpoint}",
    ]);
    expect(alpha.stdout).toBe("direct");
    expect(alpha.stderr).toContain(warning);
    const crd = await kubectl(["get", "crd", "databases.mds.dev", "-o", "jsonpath={.status.storedVersions}"]);
    expect(crd.stdout).toBe('["v1beta1"]');
  });

  it("refuses CRDs that drop a stored version (0.1.0's, v1alpha1 alone), as kube-apiserver does", async () => {
    const current = JSON.parse((await kubectl(["get", "crd", "databases.mds.dev", "-o", "json"])).stdout) as {
      metadata: { resourceVersion?: string };
      spec: { versions: { name: string; storage: boolean }[] };
    };
    const older = structuredClone(current);
    older.spec.versions = older.spec.versions
      .filter((v) => v.name === "v1alpha1")
      .map((v) => ({ ...v, storage: true }));
    const res = await kubectl(["replace", "-f", "-"], JSON.stringify(older));
    expect(res.code).toBe(1);
    expect(res.stderr).toContain(
      'status.storedVersions[0]: Invalid value: "v1beta1": missing from spec.versions; v1beta1 was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in v1beta1 and removes v1beta1 from status.storedVersions',
    );
    const after = await kubectl(["get", "crd", "databases.mds.dev", "-o", "jsonpath={.spec.versions[*].name}"]);
    expect(after.stdout).toBe("v1beta1 v1alpha1");
  });

  it("kubectl get mds lists every kind with its printer columns", async () => {
    const res = await kubectl(["get", "mds"]);
    expect(res.stderr).toBe("");
    expect(res.stdout).toMatch(/NAME\s+READY\s+SYNCED\s+STATUS\s+SECRET\s+ID\s+EXPIRES\s+AGE/);
    expect(res.stdout).toContain("database.mds.dev/orders");
    expect(res.stdout).toMatch(/NAME\s+PHASE\s+TARGET\s+BACKUP\s+COMPLETED\s+AGE/);
  });

  it("kubectl shows a BackupSchedule's next slot, a future time, as the time itself (a date column shows <invalid>)", async () => {
    const applied = await apply(`apiVersion: mds.dev/v1beta1
kind: BackupSchedule
metadata: { name: nightly }
spec: { databaseRef: { name: orders }, schedule: "0 3 * * *", keep: 7 }
`);
    expect(applied.stderr).toBe("");
    const next = new Date(Date.now() + 3 * 3_600_000).toISOString().replace(/\.\d+Z$/, "Z");
    const last = new Date(Date.now() - 21 * 3_600_000).toISOString().replace(/\.\d+Z$/, "Z");
    const patched = await kubectl([
      "patch",
      "backupschedules.mds.dev/nightly",
      "--subresource=status",
      "--type=merge",
      "-p",
      JSON.stringify({ status: { nextScheduleTime: next, lastScheduleTime: last } }),
    ]);
    expect(patched.stderr).toBe("");
    const res = await kubectl(["get", "backupschedules.mds.dev/nightly", "-o", "wide"]);
    expect(res.stderr).toBe("");
    expect(res.stdout).toMatch(/\sLAST\s+NEXT\s/);
    expect(res.stdout).toContain(next);
    expect(res.stdout).not.toContain("<invalid>");
    // The newest slot taken, in the past, stays an age.
    expect(res.stdout).toMatch(/\s21h\s/);
  });
});
