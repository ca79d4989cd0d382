import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { inClusterKubeConfig, KubeConfigError, loadKubeConfig, parseKubeConfig } from "./kubeconfig.ts";

let dir = "";
const env = { PATH: process.env["PATH"] };

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "mds-kubeconfig-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function kubeconfig(o: { current?: string; clusters?: object[]; users?: object[]; contexts?: object[] }): string {
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    "current-context": o.current,
    clusters: o.clusters ?? [],
    users: o.users ?? [],
    contexts: o.contexts ?? [],
  });
}

describe("kubeconfig files", () => {
  it("merges the KUBECONFIG list (first definition wins), follows current-context and --context", async () => {
    const a = path.join(dir, "a.yaml");
    const b = path.join(dir, "b.yaml");
    await writeFile(
      a,
      kubeconfig({
        current: "one",
        clusters: [{ name: "c1", cluster: { server: "https://one.example:6443/" } }],
        users: [{ name: "u", user: { token: "first-token" } }],
        contexts: [{ name: "one", context: { cluster: "c1", user: "u" } }],
      }),
    );
    await writeFile(
      b,
      kubeconfig({
        current: "two",
        clusters: [{ name: "c2", cluster: { server: "https://two.example" } }],
        users: [{ name: "u", user: { token: "shadowed" } }],
        contexts: [{ name: "two", context: { cluster: "c2", user: "u" } }],
      }),
    );
    const list = [a, path.join(dir, "missing.yaml"), b].join(path.delimiter);
    const kc = loadKubeConfig({ kubeconfig: list, env });
    expect([kc.server, kc.contextName]).toEqual(["https://one.example:6443", "one"]);
    expect(await kc.authHeaders()).toEqual({ authorization: "Bearer first-token" });
    const two = loadKubeConfig({ kubeconfig: list, context: "two", env });
    expect([two.server, await two.authHeaders()]).toEqual([
      "https://two.example",
      { authorization: "Bearer first-token" },
    ]);
  });

  it("falls back to ~/.kube/config, and says what to do when there is none", async () => {
    await expect(async () => loadKubeConfig({ homeDir: path.join(dir, "nohome") })).rejects.toThrow(
      "no Kubernetes cluster configured: pass --kubeconfig or set KUBECONFIG",
    );
    const home = path.join(dir, "home");
    await import("node:fs/promises").then((fs) => fs.mkdir(path.join(home, ".kube"), { recursive: true }));
    await writeFile(
      path.join(home, ".kube", "config"),
      kubeconfig({
        current: "x",
        clusters: [{ name: "c", cluster: { server: "https://home.example" } }],
        contexts: [{ name: "x", context: { cluster: "c" } }],
      }),
    );
    expect(loadKubeConfig({ homeDir: home }).server).toBe("https://home.example");
  });

  it("refuses broken files with a message naming the problem", async () => {
    const bad = path.join(dir, "bad.yaml");
    await writeFile(bad, "clusters: [\n");
    expect(() => loadKubeConfig({ kubeconfig: bad })).toThrow(/cannot parse kubeconfig .*bad\.yaml/);
    expect(() => loadKubeConfig({ kubeconfig: path.join(dir, "nope.yaml") })).toThrow(
      /cannot read kubeconfig .*nope\.yaml/,
    );
    const cfg = (o: Parameters<typeof kubeconfig>[0]) => () => parseKubeConfig(kubeconfig(o));
    expect(cfg({})).toThrow("no current-context");
    expect(cfg({ current: "x" })).toThrow('kubeconfig has no context "x"');
    expect(cfg({ current: "x", contexts: [{ name: "x", context: { cluster: "c" } }] })).toThrow(
      'cluster "c" has no server',
    );
    expect(
      cfg({
        current: "x",
        clusters: [{ name: "c", cluster: { server: "https://h" } }],
        contexts: [{ name: "x", context: { cluster: "c", user: "nobody" } }],
      }),
    ).toThrow('no user "nobody"');
    expect(
      cfg({
        current: "x",
        clusters: [{ name: "c", cluster: { server: "https://h", "certificate-authority": "/nonexistent/ca.crt" } }],
        contexts: [{ name: "x", context: { cluster: "c" } }],
      }),
    ).toThrow(/cannot read certificate-authority/);
    expect(
      cfg({
        current: "x",
        clusters: [{ name: "c", cluster: { server: "https://h" } }],
        users: [{ name: "u", user: { "auth-provider": { name: "gcp" } } }],
        contexts: [{ name: "x", context: { cluster: "c", user: "u" } }],
      }),
    ).toThrow('auth-provider "gcp" is not supported');
    expect(
      cfg({
        current: "x",
        clusters: [{ name: "c", cluster: { server: "https://h", "proxy-url": "http://proxy:3128" } }],
        contexts: [{ name: "x", context: { cluster: "c" } }],
      }),
    ).toThrow("proxy-url is not supported");
    expect(cfg({})).toThrow(KubeConfigError);
  });

  it("resolves relative certificate paths against the kubeconfig's directory and reads token files as they rotate", async () => {
    const sub = path.join(dir, "rel");
    await import("node:fs/promises").then((fs) => fs.mkdir(sub, { recursive: true }));
    await writeFile(path.join(sub, "ca.crt"), "not really a certificate");
    await writeFile(path.join(sub, "token"), "token-one\n");
    const file = path.join(sub, "config");
    await writeFile(
      file,
      kubeconfig({
        current: "x",
        clusters: [{ name: "c", cluster: { server: "https://h", "certificate-authority": "ca.crt" } }],
        users: [{ name: "u", user: { tokenFile: "token" } }],
        contexts: [{ name: "x", context: { cluster: "c", user: "u" } }],
      }),
    );
    let now = 1_000_000;
    const kc = loadKubeConfig({ kubeconfig: file, now: () => now });
    expect(await kc.authHeaders()).toEqual({ authorization: "Bearer token-one" });
    await writeFile(path.join(sub, "token"), "token-two\n");
    now += 30_000;
    expect(await kc.authHeaders()).toEqual({ authorization: "Bearer token-one" });
    now += 31_000;
    expect(await kc.authHeaders()).toEqual({ authorization: "Bearer token-two" });
    await writeFile(path.join(sub, "token"), "token-three\n");
    kc.invalidateCredentials(); // what a 401 does
    expect(await kc.authHeaders()).toEqual({ authorization: "Bearer token-three" });
    await kc.close();
  });
});

describe("exec credential plugins", () => {
  it("runs the plugin once per credential lifetime and again after expiry or a 401", async () => {
    const counter = path.join(dir, "exec-count");
    await writeFile(counter, "");
    const plugin = path.join(dir, "plugin.sh");
    // Prints a v1 ExecCredential whose token carries the call number; expiry is given as $1.
    await writeFile(
      plugin,
      `#!/bin/sh\necho x >> "${counter}"\nn=$(wc -l < "${counter}" | tr -d ' ')\n[ -n "$KUBERNETES_EXEC_INFO" ] || exit 3\necho "{\\"apiVersion\\":\\"client.authentication.k8s.io/v1\\",\\"kind\\":\\"ExecCredential\\",\\"status\\":{\\"token\\":\\"exec-$n-$PLUGIN_SUFFIX\\",\\"expirationTimestamp\\":\\"$1\\"}}"\n`,
    );
    await chmod(plugin, 0o755);
    let now = Date.parse("2030-01-01T00:00:00Z");
    const kc = parseKubeConfig(
      kubeconfig({
        current: "x",
        clusters: [{ name: "c", cluster: { server: "https://h" } }],
        users: [
          {
            name: "u",
            user: {
              exec: {
                apiVersion: "client.authentication.k8s.io/v1",
                command: "./plugin.sh",
                args: ["2030-01-01T00:10:00Z"],
                env: [{ name: "PLUGIN_SUFFIX", value: "eks" }],
              },
            },
          },
        ],
        contexts: [{ name: "x", context: { cluster: "c", user: "u" } }],
      }),
      { baseDir: dir, env, now: () => now },
    );
    const [h1, h2] = await Promise.all([kc.authHeaders(), kc.authHeaders()]);
    expect([h1, h2]).toEqual([{ authorization: "Bearer exec-1-eks" }, { authorization: "Bearer exec-1-eks" }]);
    now += 5 * 60_000;
    expect(await kc.authHeaders()).toEqual({ authorization: "Bearer exec-1-eks" });
    now += 5 * 60_000; // past expiry (minus the margin)
    expect(await kc.authHeaders()).toEqual({ authorization: "Bearer exec-2-eks" });
    kc.invalidateCredentials();
    expect(await kc.authHeaders()).toEqual({ authorization: "Bearer exec-3-eks" });
    expect((await readFile(counter, "utf8")).trim().split("\n")).toHaveLength(3);
  });

  it("reports a failing plugin without echoing its output", async () => {
    const plugin = path.join(dir, "failing.sh");
    await writeFile(
      plugin,
      `#!/bin/sh\necho '{"status":{"token":"leaked-secret"}}'\necho "credentials expired, run aws sso login" >&2\nexit 1\n`,
    );
    await chmod(plugin, 0o755);
    const kc = parseKubeConfig(
      kubeconfig({
        current: "x",
        clusters: [{ name: "c", cluster: { server: "https://h" } }],
        users: [{ name: "u", user: { exec: { command: plugin } } }],
        contexts: [{ name: "x", context: { cluster: "c", user: "u" } }],
      }),
      { env },
    );
    const err = await kc.authHeaders().then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(err?.message).toContain("exited with 1: credentials expired, run aws sso login");
    expect(err?.message).not.toContain("leaked-secret");
  });
});

describe("in-cluster config", () => {
  it("uses KUBERNETES_SERVICE_HOST/PORT, the service account CA and its rotating token", async () => {
    const sa = path.join(dir, "sa");
    await import("node:fs/promises").then((fs) => fs.mkdir(sa, { recursive: true }));
    await writeFile(path.join(sa, "ca.crt"), "ca");
    await writeFile(path.join(sa, "token"), "sa-token-1");
    let now = 0;
    const kc = inClusterKubeConfig({
      env: { KUBERNETES_SERVICE_HOST: "fd00::1", KUBERNETES_SERVICE_PORT: "6443" },
      serviceAccountDir: sa,
      now: () => now,
    });
    expect([kc.server, kc.contextName]).toEqual(["https://[fd00::1]:6443", "in-cluster"]);
    expect(await kc.authHeaders()).toEqual({ authorization: "Bearer sa-token-1" });
    await writeFile(path.join(sa, "token"), "sa-token-2");
    now += 61_000;
    expect(await kc.authHeaders()).toEqual({ authorization: "Bearer sa-token-2" });
    expect(
      loadKubeConfig({ inCluster: true, env: { KUBERNETES_SERVICE_HOST: "10.0.0.1" }, serviceAccountDir: sa }).server,
    ).toBe("https://10.0.0.1:443");
    expect(() => inClusterKubeConfig({ env: {}, serviceAccountDir: sa })).toThrow("KUBERNETES_SERVICE_HOST is not set");
    expect(() =>
      inClusterKubeConfig({ env: { KUBERNETES_SERVICE_HOST: "h" }, serviceAccountDir: path.join(dir, "none") }),
    ).toThrow(/cannot load in-cluster config/);
  });
});
