import { mkdtemp, rm } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../test/support/eventually.ts";
import { startDevkube, type Devkube } from "@mds/devkube";
import { createKubeClient, type KubeClient } from "./client.ts";
import { KubeConflictError, KubeNotFoundError } from "./errors.ts";
import { createInformer, type Informer } from "./informer.ts";
import { parseKubeConfig, type KubeConfig } from "./kubeconfig.ts";
import { SecretType, type KubeObject, type Secret } from "./types.ts";

// The kube layer against devkube (a real HTTPS apiserver stand-in): typed errors, a paginated list, and an
// informer that survives dropped watches, expired resource versions (410) and a watch that goes silent.

let devkube: Devkube;
let dir: string;
let kc: KubeConfig;
let kube: KubeClient;
const logger = pino({ level: "silent" });

const configMap = (name: string, data: Record<string, string> = {}) => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name, namespace: "default" },
  data,
});
const ConfigMapType = { group: "", version: "v1", plural: "configmaps", kind: "ConfigMap", namespaced: true };

/** A proxy that can freeze open connections (bytes stop, sockets stay open): a half-open watch. */
async function startFreezingProxy(targetPort: number) {
  const pairs = new Set<{ client: net.Socket; upstream: net.Socket; frozen: boolean }>();
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, "127.0.0.1");
    const pair = { client, upstream, frozen: false };
    pairs.add(pair);
    client.on("data", (d) => upstream.write(d));
    upstream.on("data", (d) => {
      if (!pair.frozen) client.write(d);
    });
    const close = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("close", close).on("error", close);
    upstream.on("close", close).on("error", close);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as net.AddressInfo).port,
    freeze: () => pairs.forEach((p) => (p.frozen = true)),
    stop: async () => {
      pairs.forEach((p) => (p.client.destroy(), p.upstream.destroy()));
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "mds-kube-"));
  devkube = await startDevkube({ dir, port: 0 });
  kc = parseKubeConfig(devkube.kubeconfig);
  kube = createKubeClient(kc);
}, 60_000);

afterAll(async () => {
  await devkube?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe("kube client", () => {
  it("maps 404 and 409 to typed errors and returns undefined for a missing object", async () => {
    expect(await kube.get(ConfigMapType, "default", "nope")).toBeUndefined();
    await kube.create(ConfigMapType, configMap("c0"));
    await expect(kube.create(ConfigMapType, configMap("c0"))).rejects.toBeInstanceOf(KubeConflictError);
    const got = (await kube.get<KubeObject>(ConfigMapType, "default", "c0"))!;
    await kube.patch(ConfigMapType, "default", "c0", { data: { a: "1" } });
    await expect(
      kube.patch(ConfigMapType, "default", "c0", {
        metadata: { resourceVersion: got.metadata.resourceVersion },
        data: { a: "2" },
      }),
    ).rejects.toBeInstanceOf(KubeConflictError);
    await expect(kube.patch(ConfigMapType, "default", "missing", { data: {} })).rejects.toBeInstanceOf(
      KubeNotFoundError,
    );
    await kube.delete(ConfigMapType, "default", "c0");
    await kube.delete(ConfigMapType, "default", "c0");
  });
});

describe("informer", () => {
  let informer: Informer<KubeObject>;
  let proxy: Awaited<ReturnType<typeof startFreezingProxy>>;
  const seen = new Map<string, string>();

  beforeAll(async () => {
    for (let i = 1; i <= 5; i++) await kube.create(ConfigMapType, configMap(`cm${i}`, { v: "0" }));
    proxy = await startFreezingProxy(Number(new URL(devkube.url).port));
    const proxied = parseKubeConfig(devkube.kubeconfig.replace(new URL(devkube.url).host, `127.0.0.1:${proxy.port}`));
    informer = createInformer<KubeObject>({
      kubeConfig: proxied,
      client: createKubeClient(proxied),
      type: ConfigMapType,
      namespace: "default",
      pageSize: 2,
      watchInactivityMs: 1_500,
      minWatchIntervalMs: 200,
      logger,
      onEvent: (event, obj) =>
        seen.set(
          obj.metadata.name,
          event === "delete" ? "deleted" : String((obj["data"] as { v?: string } | undefined)?.v),
        ),
    });
    await informer.start();
  });

  afterAll(async () => {
    await informer?.stop();
    await proxy?.stop();
  });

  it("fills its cache with a paginated list, then follows the watch", async () => {
    // devkube may seed its own ConfigMaps (kube-root-ca.crt); ours are cm1..cm5.
    expect(
      informer
        .list()
        .map((o) => o.metadata.name)
        .filter((n) => /^cm\d$/.test(n))
        .sort(),
    ).toEqual(["cm1", "cm2", "cm3", "cm4", "cm5"]);
    await kube.patch(ConfigMapType, "default", "cm1", { data: { v: "1" } });
    await eventually(() => expect(seen.get("cm1")).toBe("1"));
  });

  it("hands out copies (the cache keeps packed JSON) and lists one namespace", () => {
    const cm = informer.get("default", "cm2");
    expect(cm?.["data"]).toEqual({ v: "0" });
    (cm?.["data"] as { v: string }).v = "changed by a caller";
    expect(informer.get("default", "cm2")?.["data"]).toEqual({ v: "0" });
    expect(informer.list("default").length).toBe(informer.list().length);
    expect(informer.list("elsewhere")).toEqual([]);
  });

  it("watches again after the server ends every watch", async () => {
    devkube.closeWatches();
    await kube.patch(ConfigMapType, "default", "cm2", { data: { v: "2" } });
    await eventually(() => expect(seen.get("cm2")).toBe("2"));
  });

  it("relists once its resource version has expired (410), missing no change", async () => {
    devkube.setWatchHistoryLimit(2);
    devkube.closeWatches();
    // Many changes while it reconnects: its resourceVersion falls out of the 2-event history.
    for (let i = 0; i < 6; i++) await kube.patch(ConfigMapType, "default", "cm3", { data: { v: `3.${i}` } });
    await kube.delete(ConfigMapType, "default", "cm4");
    await eventually(() => {
      expect(seen.get("cm3")).toBe("3.5");
      expect(seen.get("cm4")).toBe("deleted");
      expect(informer.get("default", "cm4")).toBeUndefined();
    });
    devkube.setWatchHistoryLimit(1000);
  });

  it("drops a watch that went silent (half-open connection) and watches again", async () => {
    proxy.freeze();
    await kube.patch(ConfigMapType, "default", "cm5", { data: { v: "5" } });
    await eventually(() => expect(seen.get("cm5")).toBe("5"));
    expect(informer.hasSynced()).toBe(true);
  });

  it("caches only Secrets that match its label selector", async () => {
    const owned: Secret = {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "mine", namespace: "default", labels: { "app.kubernetes.io/managed-by": "mds-operator" } },
      data: {},
    };
    const other: Secret = {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "theirs", namespace: "default" },
      data: {},
    };
    await kube.create(SecretType, owned);
    await kube.create(SecretType, other);
    const secrets = createInformer<Secret>({
      kubeConfig: kc,
      client: kube,
      type: SecretType,
      labelSelector: "app.kubernetes.io/managed-by=mds-operator",
      logger,
      onEvent: () => {},
    });
    await secrets.start();
    await kube.create(SecretType, { ...other, metadata: { name: "theirs-2", namespace: "default" } });
    await kube.create(SecretType, { ...owned, metadata: { ...owned.metadata, name: "mine-2" } });
    await eventually(() =>
      expect(
        secrets
          .list()
          .map((s) => s.metadata.name)
          .sort(),
      ).toEqual(["mine", "mine-2"]),
    );
    expect(secrets.list().every((s) => s.metadata.managedFields === undefined)).toBe(true);
    await secrets.stop();
  });
});
