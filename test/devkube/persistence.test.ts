import * as k8s from "@kubernetes/client-node";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, unlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { eventually } from "./helpers.ts";

// `mds devkube` as a process: it writes DIR/kubeconfig once serving, keeps objects under DIR
// across a clean stop and across `kill -9`, and never prints its token.

const root = path.resolve(import.meta.dirname, "../..");
const node = path.join(root, "node_modules/.bin/node");
let dir: string;
const dirs: string[] = [];
const children: ChildProcess[] = [];

function start(extra: string[] = []): { child: ChildProcess; output: () => string } {
  const child = spawn(
    node,
    [path.join(root, "bin/mds.js"), "devkube", "--dir", dir, "--port", "0", "--log-level", "debug", ...extra],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  children.push(child);
  let out = "";
  child.stdout?.on("data", (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on("data", (d: Buffer) => {
    out += d.toString();
  });
  return { child, output: () => out };
}

async function client(): Promise<k8s.CoreV1Api> {
  const kubeconfig = path.join(dir, "kubeconfig");
  await eventually(() => existsSync(kubeconfig), { timeoutMs: 30_000 });
  const kc = new k8s.KubeConfig();
  kc.loadFromString(await readFile(kubeconfig, "utf8"));
  return kc.makeApiClient(k8s.CoreV1Api);
}

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode);
    else child.once("exit", (code) => resolve(code));
  });
}

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

describe("mds devkube process", () => {
  it("keeps objects across SIGTERM and kill -9, and never prints the token", async () => {
    dir = await mkdtemp(path.join(tmpdir(), "devkube-cli-"));
    dirs.push(dir);
    const first = start();
    let core = await client();
    await core.createNamespacedSecret({
      namespace: "default",
      body: { metadata: { name: "kept" }, stringData: { password: "planted-secret-value" } },
    });
    await core.createNamespacedConfigMap({
      namespace: "default",
      body: { metadata: { name: "before-kill" }, data: { a: "1" } },
    });
    const rvBefore = Number((await core.listNamespacedConfigMap({ namespace: "default" })).metadata?.resourceVersion);
    first.child.kill("SIGTERM");
    expect(await exited(first.child)).toBe(0);
    const token = (await readFile(path.join(dir, "token"), "utf8")).trim();
    expect(first.output()).toContain("devkube serving at https://127.0.0.1:");
    expect(first.output()).not.toContain(token);
    expect(first.output()).not.toContain("planted-secret-value");

    await unlink(path.join(dir, "kubeconfig"));
    const second = start();
    core = await client();
    expect((await core.readNamespacedSecret({ name: "kept", namespace: "default" })).data).toEqual({
      password: Buffer.from("planted-secret-value").toString("base64"),
    });
    await core.createNamespacedConfigMap({ namespace: "default", body: { metadata: { name: "acknowledged" } } });
    second.child.kill("SIGKILL");
    await exited(second.child);

    await unlink(path.join(dir, "kubeconfig"));
    const third = start();
    core = await client();
    const names = (await core.listNamespacedConfigMap({ namespace: "default" })).items.map((c) => c.metadata?.name);
    expect(names).toEqual(expect.arrayContaining(["before-kill", "acknowledged"]));
    const rvAfter = Number((await core.listNamespacedConfigMap({ namespace: "default" })).metadata?.resourceVersion);
    expect(rvAfter).toBeGreaterThan(rvBefore);
    third.child.kill("SIGTERM");
    expect(await exited(third.child)).toBe(0);
  });

  it("rejects bad flags with usage", async () => {
    const child = spawn(node, [path.join(root, "bin/mds.js"), "devkube", "--port", "x"], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let err = "";
    child.stderr.on("data", (d: Buffer) => {
      err += d.toString();
    });
    expect(await exited(child)).toBe(2);
    expect(err).toContain("--dir is required");
  });

  it("rejects a --pod-ready-delay that is not whole milliseconds", async () => {
    const child = spawn(
      node,
      [path.join(root, "bin/mds.js"), "devkube", "--dir", tmpdir(), "--pod-ready-delay", "soon"],
      {
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let err = "";
    child.stderr.on("data", (d: Buffer) => {
      err += d.toString();
    });
    expect(await exited(child)).toBe(2);
    expect(err).toContain('--pod-ready-delay must be a whole number of milliseconds, got "soon"');
  });

  it("--no-kubelet: pods are scheduled and stay Pending until a client (a harness playing the kubelet) reports them", async () => {
    dir = await mkdtemp(path.join(tmpdir(), "devkube-cli-"));
    dirs.push(dir);
    const proc = start(["--no-kubelet", "--pod-ready-delay", "0"]);
    const core = await client();
    await core.createNamespacedPod({
      namespace: "default",
      body: {
        metadata: { name: "app" },
        spec: { containers: [{ name: "app", image: "x", envFrom: [{ secretRef: { name: "db" } }] }] },
      },
    });
    const scheduled = await eventually(async () => {
      const p = await core.readNamespacedPod({ name: "app", namespace: "default" });
      return p.spec?.nodeName === "devkube-node" && p;
    });
    expect(scheduled.status?.phase).toBe("Pending");
    expect(scheduled.spec?.containers[0]?.envFrom).toEqual([{ secretRef: { name: "db" } }]);
    scheduled.status = {
      ...scheduled.status,
      phase: "Running",
      conditions: [{ type: "Ready", status: "True", lastTransitionTime: new Date() }],
    };
    const written = await core.replaceNamespacedPodStatus({ name: "app", namespace: "default", body: scheduled });
    expect(written.status?.phase).toBe("Running");
    proc.child.kill("SIGTERM");
    expect(await exited(proc.child)).toBe(0);
  });
});
