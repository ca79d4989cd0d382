import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { stringify } from "yaml";
import { Agent, fetch } from "undici";
import { startDevkube, type Devkube } from "@mds/devkube";
import { crdOf } from "../resources/kit/crd.ts";
import { crdDefinitions } from "../resources/crd-files.ts";
import { eventually } from "../../test/support/eventually.ts";
import { runKubectl } from "../../test/support/kubectl.ts";
import { exampleIn } from "../../test/support/example-in.ts";
import { webhookAddress, type WebhookProcess } from "../../test/support/webhook-process.ts";

// The API server's side of conversion, on devkube with the real kubectl 1.32: the CRDs serve v1alpha1 (deprecated)
// and v1beta1 (storage), and every read, write, list and watch in the version that is not stored goes through
// `mds webhook`, run as its own process as in a cluster.

const repo = fileURLToPath(new URL("../..", import.meta.url));
const databases = join(repo, "examples/databases.yaml");
const deprecation = "Warning: mds.dev/v1alpha1 Database is deprecated; use mds.dev/v1beta1 Database";

describe("CRD conversion through the webhook on devkube", () => {
  let dir = "";
  let kube: Devkube;
  let webhook: WebhookProcess | undefined;
  let url = "";
  const kubectl = (args: string[], input?: string) =>
    runKubectl(kube.kubeconfigPath, args, { cacheDir: join(dir, "kubectl-cache"), ...(input ? { input } : {}) });
  const json = async (args: string[]) => {
    const res = await kubectl([...args, "-o", "json"]);
    expect(res.code, res.stderr).toBe(0);
    return { obj: JSON.parse(res.stdout) as Record<string, unknown>, stderr: res.stderr };
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "mds-conversion-"));
    kube = await startDevkube({ dir: join(dir, "kube"), port: 0 });
    expect((await kubectl(["create", "namespace", "mds-system"])).code).toBe(0);
    const address = await webhookAddress();
    url = address.url;
    const crds = crdDefinitions.map((d) => stringify(crdOf(d, { conversion: { url } }))).join("---\n");
    expect((await kubectl(["apply", "-f", "-"], crds)).stderr).toBe("");
    webhook = await address.start(kube.kubeconfigPath);
    for (const d of crdDefinitions)
      await eventually(
        async () =>
          (
            await kubectl([
              "get",
              "crd",
              `${d.plural}.mds.dev`,
              "-o",
              "jsonpath={.spec.conversion.webhook.clientConfig.caBundle}",
            ])
          ).stdout.length > 0,
        { what: `the caBundle of ${d.plural}.mds.dev` },
      );
  });
  afterAll(async () => {
    await webhook?.stop();
    await kube?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it("stores v1beta1 and serves both versions: a v1alpha1 apply reads back in either, with kubectl's deprecation warning", async () => {
    const applied = await kubectl(["apply", "-f", "-"], exampleIn(databases));
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stderr).toContain(deprecation);

    const beta = await json(["get", "databases.v1beta1.mds.dev", "orders"]);
    expect(beta.stderr).toBe("");
    expect(beta.obj).toMatchObject({
      apiVersion: "mds.dev/v1beta1",
      spec: { connectionSecret: { endpoint: "Pooled" } },
    });
    const alpha = await json(["get", "databases.v1alpha1.mds.dev", "scratch"]);
    expect(alpha.stderr).toContain(deprecation);
    expect(alpha.obj).toMatchObject({
      apiVersion: "mds.dev/v1alpha1",
      spec: { connectionSecret: { endpoint: "direct" } },
    });

    const list = await json(["get", "databases.v1beta1.mds.dev"]);
    expect(
      (list.obj["items"] as { spec: { connectionSecret: { endpoint: string } } }[])
        .map((i) => i.spec.connectionSecret.endpoint)
        .sort(),
    ).toEqual(["Direct", "Pooled"]);
    const table = await kubectl(["get", "databases.v1alpha1.mds.dev"]);
    expect(table.stdout).toMatch(/^NAME\s+READY/);
    expect(table.stdout).toContain("scratch");

    const crd = await json(["get", "crd", "databases.mds.dev"]);
    expect((crd.obj["status"] as { storedVersions: string[] }).storedVersions).toEqual(["v1beta1"]);
  });

  it("converts writes in v1alpha1 into the stored v1beta1, and the v1beta1 schema validates them", async () => {
    const patched = await kubectl([
      "patch",
      "databases.v1alpha1.mds.dev",
      "orders",
      "--type=merge",
      "-p",
      '{"spec":{"connectionSecret":{"endpoint":"accelerate"}}}',
    ]);
    expect(patched.code, patched.stderr).toBe(0);
    expect((await json(["get", "databases.v1beta1.mds.dev", "orders"])).obj).toMatchObject({
      spec: { connectionSecret: { endpoint: "Accelerate" } },
    });
    const wrong = await kubectl([
      "patch",
      "databases.v1beta1.mds.dev",
      "orders",
      "--type=merge",
      "-p",
      '{"spec":{"connectionSecret":{"endpoint":"direct"}}}',
    ]);
    expect(wrong.code).not.toBe(0);
    expect(wrong.stderr).toContain('Unsupported value: "direct": supported values: "Pooled", "Direct", "Accelerate"');
  });

  it("converts a watch's events into the version watched", async () => {
    const ca = await readFile(join(dir, "kube/pki/ca.crt"), "utf8");
    const dispatcher = new Agent({ connect: { ca } });
    const res = await fetch(
      `${kube.url}/apis/mds.dev/v1alpha1/namespaces/default/databases?watch=true&fieldSelector=metadata.name%3Dorders`,
      {
        headers: { authorization: `Bearer ${kube.token}` },
        dispatcher,
      },
    );
    expect(res.headers.get("warning")).toContain("mds.dev/v1alpha1 Database is deprecated");
    const reader = res.body!.getReader();
    let text = "";
    while (!text.includes("\n")) text += new TextDecoder().decode((await reader.read()).value);
    await reader.cancel();
    await dispatcher.close();
    const event = JSON.parse(text.split("\n")[0]!) as {
      type: string;
      object: { apiVersion: string; spec: { connectionSecret: { endpoint: string } } };
    };
    expect(event.type).toBe("ADDED");
    expect(event.object.apiVersion).toBe("mds.dev/v1alpha1");
    expect(event.object.spec.connectionSecret.endpoint).toBe("accelerate");
  });

  it("answers as kube-apiserver does when the webhook is down: the stored version still reads, the other fails", async () => {
    await webhook!.stop();
    expect((await kubectl(["get", "databases.v1beta1.mds.dev", "orders"])).code).toBe(0);
    const down = await kubectl(["get", "databases.v1alpha1.mds.dev", "orders"]);
    expect(down.code).not.toBe(0);
    const port = new URL(url).port;
    expect(down.stderr).toContain(
      `Error from server: conversion webhook for mds.dev/v1beta1, Kind=Database failed: Post "${url}?timeout=30s": dial tcp 127.0.0.1:${port}: connect: connection refused`,
    );
  });
});
