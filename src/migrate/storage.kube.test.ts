import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { stringify } from "yaml";
import { startDevkube, type Devkube } from "@mds/devkube";
import { crdOf } from "../resources/kit/crd.ts";
import { crdDefinitions } from "../resources/crd-files.ts";
import { eventually } from "../../test/support/eventually.ts";
import { runKubectl } from "../../test/support/kubectl.ts";
import { exampleIn } from "../../test/support/example-in.ts";
import { webhookAddress, type WebhookProcess } from "../../test/support/webhook-process.ts";

// An upgrade's storage migration, observed through the API only: objects written by 0.1.0's CRDs (v1alpha1 stored),
// the new CRDs applied (storedVersions [v1alpha1, v1beta1]), `mds migrate-storage` run as a user runs it; after it,
// storedVersions is [v1beta1] and every object reads in v1beta1 with the webhook stopped, which only an object
// stored in v1beta1 can.

const run = promisify(execFile);
const bin = fileURLToPath(new URL("../../bin/mds.js", import.meta.url));
const examples = fileURLToPath(new URL("../../examples", import.meta.url));

describe("mds migrate-storage on devkube", () => {
  let dir = "";
  let kube: Devkube;
  let webhook: WebhookProcess | undefined;
  const kubectl = (args: string[], input?: string) =>
    runKubectl(kube.kubeconfigPath, args, { cacheDir: join(dir, "kubectl-cache"), ...(input ? { input } : {}) });
  const storedVersions = async (crd: string) =>
    (await kubectl(["get", "crd", crd, "-o", "jsonpath={.status.storedVersions}"])).stdout;
  const migrate = () =>
    run(process.execPath, [bin, "migrate-storage", "--kubeconfig", kube.kubeconfigPath, "--per-second", "1000"]);

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "mds-migrate-"));
    kube = await startDevkube({ dir: join(dir, "kube"), port: 0 });
    expect((await kubectl(["create", "namespace", "mds-system"])).code).toBe(0);
    // 0.1.0: v1alpha1 only, and objects of several kinds written in it
    const old = crdDefinitions.map((d) => stringify(crdOf(d))).join("---\n");
    expect((await kubectl(["apply", "-f", "-"], old)).code).toBe(0);
    for (const f of [
      "databases.yaml",
      "project.yaml",
      "credentials/connection.yaml",
      "backup-schedule/orders-nightly.yaml",
    ]) {
      const res = await kubectl(["apply", "-f", "-"], exampleIn(join(examples, f)));
      expect(res.code, res.stderr).toBe(0);
    }
  });
  afterAll(async () => {
    await webhook?.stop();
    await kube?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it("rewrites every object in v1beta1 and narrows storedVersions, keeping the objects as they were", async () => {
    expect(await storedVersions("databases.mds.dev")).toBe('["v1alpha1"]');
    const address = await webhookAddress();
    const crds = crdDefinitions.map((d) => stringify(crdOf(d, { conversion: { url: address.url } }))).join("---\n");
    expect((await kubectl(["apply", "-f", "-"], crds)).code).toBe(0);
    webhook = await address.start(kube.kubeconfigPath);
    await eventually(
      async () =>
        (
          await kubectl([
            "get",
            "crd",
            "databases.mds.dev",
            "-o",
            "jsonpath={.spec.conversion.webhook.clientConfig.caBundle}",
          ])
        ).stdout !== "",
      { what: "the caBundle" },
    );
    expect(await storedVersions("databases.mds.dev")).toBe('["v1alpha1","v1beta1"]');
    const before = JSON.parse((await kubectl(["get", "databases.v1beta1.mds.dev", "orders", "-o", "json"])).stdout) as {
      metadata: { generation: number; annotations: Record<string, string> };
      spec: unknown;
    };

    const { stdout } = await migrate();
    expect(stdout).toContain(
      "databases.mds.dev: 2 object(s) written back in v1beta1; storedVersions [v1alpha1, v1beta1] → [v1beta1]",
    );
    for (const d of crdDefinitions) expect(await storedVersions(`${d.plural}.mds.dev`)).toBe('["v1beta1"]');

    // Stored in v1beta1: readable in it without the webhook; v1alpha1 still needs it.
    await webhook.stop();
    const after = JSON.parse(
      (await kubectl(["get", "databases.v1beta1.mds.dev", "orders", "-o", "json"])).stdout,
    ) as typeof before;
    expect(after.spec).toEqual(before.spec);
    expect(after.metadata.generation).toBe(before.metadata.generation);
    expect(after.metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]).toBe(
      before.metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"],
    );
    for (const kind of ["databases", "projects", "connections", "backupschedules"])
      expect((await kubectl(["get", `${kind}.v1beta1.mds.dev`, "-o", "name"])).code).toBe(0);
    expect((await kubectl(["get", "databases.v1alpha1.mds.dev", "orders"])).stderr).toContain("conversion webhook for");

    // Run again: nothing left to do, nothing written.
    const rv = (
      await kubectl(["get", "databases.v1beta1.mds.dev", "orders", "-o", "jsonpath={.metadata.resourceVersion}"])
    ).stdout;
    expect((await migrate()).stdout).toContain("databases.mds.dev: stored in v1beta1 only, nothing to migrate");
    expect(
      (await kubectl(["get", "databases.v1beta1.mds.dev", "orders", "-o", "jsonpath={.metadata.resourceVersion}"]))
        .stdout,
    ).toBe(rv);
  });

  it("devkube refuses storedVersions without the storage version, as kube-apiserver does", async () => {
    const res = await kubectl([
      "patch",
      "crd",
      "databases.mds.dev",
      "--subresource=status",
      "--type=merge",
      "-p",
      '{"status":{"storedVersions":["v1alpha1"]}}',
    ]);
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain("must have the storage version v1beta1");
  });
});
