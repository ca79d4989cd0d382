import * as k8s from "@kubernetes/client-node";
import { Writable } from "node:stream";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, startHarness, WIDGET_CRD, type Harness } from "./helpers.ts";

// devkube driven by the real @kubernetes/client-node 2.0.1: typed APIs, custom objects,
// informers across reconnects and 410s, raw watches, leases and events.

let h: Harness;
let kc: k8s.KubeConfig;
let core: k8s.CoreV1Api;
const requests: { method: string; path: string; status: number; contentType?: string }[] = [];

function apiError(err: unknown): { code: number; body: Record<string, unknown> } {
  if (!(err instanceof k8s.ApiException)) throw err;
  return { code: err.code, body: JSON.parse(String(err.body)) as Record<string, unknown> };
}
async function expectApiError(p: Promise<unknown>): Promise<{ code: number; body: Record<string, unknown> }> {
  try {
    await p;
  } catch (err) {
    return apiError(err);
  }
  throw new Error("expected an ApiException");
}
const merge = k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch);

beforeAll(async () => {
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const line of chunk.toString().split("\n")) {
        if (!line) continue;
        const rec = JSON.parse(line) as {
          msg: string;
          method: string;
          path: string;
          status: number;
          contentType?: string;
        };
        if (rec.msg === "request")
          requests.push({
            method: rec.method,
            path: rec.path,
            status: rec.status,
            ...(rec.contentType ? { contentType: rec.contentType } : {}),
          });
      }
      cb();
    },
  });
  h = await startHarness({ logger: pino({ level: "debug" }, sink) });
  kc = new k8s.KubeConfig();
  kc.loadFromString(h.devkube.kubeconfig);
  core = kc.makeApiClient(k8s.CoreV1Api);
  // with kubectl: client-node's model serializer drops x-kubernetes-* keys of a plain object
  // (it expects x_kubernetes_* model properties)
  await h.ok(["apply", "-f", "-"], WIDGET_CRD);
  const ext = kc.makeApiClient(k8s.ApiextensionsV1Api);
  expect(
    (await ext.readCustomResourceDefinition({ name: "widgets.example.com" })).status?.conditions?.some(
      (c) => c.type === "Established",
    ),
  ).toBe(true);
});
afterAll(async () => {
  await h?.close();
});

describe("typed core APIs", () => {
  it("creates, reads, replaces and deletes a ConfigMap with kube's errors", async () => {
    const created = await core.createNamespacedConfigMap({
      namespace: "default",
      body: { metadata: { name: "c1" }, data: { a: "1" } },
    });
    expect(created.metadata?.uid).toBeTruthy();
    expect(created.metadata?.generation).toBeUndefined();
    const read = await core.readNamespacedConfigMap({ name: "c1", namespace: "default" });
    read.data = { a: "2" };
    const replaced = await core.replaceNamespacedConfigMap({ name: "c1", namespace: "default", body: read });
    expect(replaced.metadata?.resourceVersion).not.toBe(read.metadata?.resourceVersion);
    const stale = await expectApiError(
      core.replaceNamespacedConfigMap({ name: "c1", namespace: "default", body: read }),
    );
    expect(stale.code).toBe(409);
    expect(stale.body["reason"]).toBe("Conflict");
    const dup = await expectApiError(
      core.createNamespacedConfigMap({ namespace: "default", body: { metadata: { name: "c1" } } }),
    );
    expect(dup.body).toMatchObject({
      kind: "Status",
      code: 409,
      reason: "AlreadyExists",
      message: 'configmaps "c1" already exists',
    });
    const copied = await expectApiError(
      core.createNamespacedConfigMap({
        namespace: "default",
        body: { metadata: { name: "c9", resourceVersion: "5" } },
      }),
    );
    expect(copied.body["message"]).toContain("resourceVersion should not be set on objects to be created");
    await core.deleteNamespacedConfigMap({ name: "c1", namespace: "default" });
    const missing = await expectApiError(core.readNamespacedConfigMap({ name: "c1", namespace: "default" }));
    expect(missing.body).toMatchObject({ code: 404, reason: "NotFound", details: { name: "c1", kind: "configmaps" } });
    const noNs = await expectApiError(
      core.createNamespacedConfigMap({ namespace: "nowhere", body: { metadata: { name: "x" } } }),
    );
    expect(noNs.body).toMatchObject({ code: 404, message: 'namespaces "nowhere" not found' });
  });

  it("patches with JSON patch by default, merge patch, and server-side apply", async () => {
    await core.createNamespacedConfigMap({
      namespace: "default",
      body: { metadata: { name: "p1" }, data: { a: "1" } },
    });
    const jp = await core.patchNamespacedConfigMap({
      name: "p1",
      namespace: "default",
      body: [{ op: "add", path: "/data/b", value: "2" }],
    });
    expect(jp.data).toEqual({ a: "1", b: "2" });
    const failed = await expectApiError(
      core.patchNamespacedConfigMap({
        name: "p1",
        namespace: "default",
        body: [{ op: "add", path: "/metadata/finalizers/-", value: "x" }],
      }),
    );
    expect(failed.code).toBe(422);
    const notArray = await expectApiError(
      core.patchNamespacedConfigMap({ name: "p1", namespace: "default", body: { data: { c: "3" } } }),
    );
    expect(notArray.code).toBe(400);
    const mp = await core.patchNamespacedConfigMap(
      { name: "p1", namespace: "default", body: { data: { a: null, c: "3" } } },
      merge,
    );
    expect(mp.data).toEqual({ b: "2", c: "3" });
    const ssa = await core.patchNamespacedConfigMap(
      {
        name: "p1",
        namespace: "default",
        body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "p1" }, data: { d: "4" } },
        fieldManager: "tester",
        force: true,
      },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.ServerSideApply),
    );
    expect(ssa.data).toMatchObject({ d: "4" });
    expect(ssa.metadata?.managedFields?.some((m) => m.manager === "tester" && m.operation === "Apply")).toBe(true);
    const noManager = await expectApiError(
      core.patchNamespacedConfigMap(
        { name: "p1", namespace: "default", body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "p1" } } },
        k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.ServerSideApply),
      ),
    );
    expect(noManager.code).toBe(422);
  });

  it("folds Secret stringData into base64 data and rejects bad base64", async () => {
    const s = await core.createNamespacedSecret({
      namespace: "default",
      body: { metadata: { name: "s1" }, stringData: { password: "hunter2" } },
    });
    expect(s.data).toEqual({ password: Buffer.from("hunter2").toString("base64") });
    expect(s.type).toBe("Opaque");
    expect((s as Record<string, unknown>)["stringData"]).toBeUndefined();
    const bad = await expectApiError(
      core.createNamespacedSecret({
        namespace: "default",
        body: { metadata: { name: "s2" }, data: { x: "not base64!" } },
      }),
    );
    expect(bad.code).toBe(400);
    expect(bad.body["message"]).toContain("illegal base64 data at input byte");
    const tls = await expectApiError(
      core.createNamespacedSecret({
        namespace: "default",
        body: { metadata: { name: "s3" }, type: "kubernetes.io/tls", stringData: { "tls.crt": "x" } },
      }),
    );
    expect(tls.body).toMatchObject({ code: 422, message: 'Secret "s3" is invalid: data[tls.key]: Required value' });
  });

  it("answers dry-run writes without storing", async () => {
    const dry = await core.createNamespacedConfigMap({
      namespace: "default",
      body: { metadata: { name: "dry" } },
      dryRun: "All",
    });
    expect(dry.metadata?.name).toBe("dry");
    expect((await expectApiError(core.readNamespacedConfigMap({ name: "dry", namespace: "default" }))).code).toBe(404);
  });

  it("pages lists with limit and continue", async () => {
    await core.createNamespace({ body: { metadata: { name: "paging" } } });
    for (let i = 0; i < 5; i++)
      await core.createNamespacedConfigMap({ namespace: "paging", body: { metadata: { name: `c${i}` } } });
    // The root-CA ConfigMap is published into a new namespace by a controller, after the create (as on a cluster):
    // under load the walk started before it (a fresh-clone CI run listed five names).
    await eventually(() => core.readNamespacedConfigMap({ name: "kube-root-ca.crt", namespace: "paging" }));
    const names: string[] = [];
    let cont: string | undefined;
    let pages = 0;
    do {
      const page: k8s.V1ConfigMapList = await core.listNamespacedConfigMap({
        namespace: "paging",
        limit: 2,
        ...(cont ? { _continue: cont } : {}),
      });
      names.push(...page.items.map((c) => c.metadata?.name ?? ""));
      cont = page.metadata?._continue;
      pages++;
    } while (cont);
    expect(names).toEqual(["c0", "c1", "c2", "c3", "c4", "kube-root-ca.crt"]);
    expect(pages).toBe(3);
    const first = await core.listNamespacedConfigMap({ namespace: "paging", limit: 2 });
    expect(first.metadata?.remainingItemCount).toBe(4);
  });

  it("pages a label-selected list: every match once, no empty last page, no remainingItemCount", async () => {
    await core.createNamespace({ body: { metadata: { name: "paging-selected" } } });
    for (let i = 0; i < 7; i++) {
      await core.createNamespacedConfigMap({
        namespace: "paging-selected",
        body: { metadata: { name: `s${i}`, labels: { pick: i % 3 === 0 ? "yes" : "no" } } },
      });
    }
    const names: string[] = [];
    let cont: string | undefined;
    do {
      const page: k8s.V1ConfigMapList = await core.listNamespacedConfigMap({
        namespace: "paging-selected",
        labelSelector: "pick=yes",
        limit: 2,
        ...(cont ? { _continue: cont } : {}),
      });
      expect(page.items.length).toBeGreaterThan(0);
      expect(page.metadata?.remainingItemCount).toBeUndefined();
      names.push(...page.items.map((c) => c.metadata?.name ?? ""));
      cont = page.metadata?._continue;
    } while (cont);
    expect(names).toEqual(["s0", "s3", "s6"]);
  });
});

describe("custom objects", () => {
  const custom = () => kc.makeApiClient(k8s.CustomObjectsApi);
  const ref = { group: "example.com", version: "v1", namespace: "default", plural: "widgets" };

  it("keeps status and spec apart, bumps generation only for spec, and ignores no-op writes", async () => {
    const api = custom();
    const created = (await api.createNamespacedCustomObject({
      ...ref,
      body: {
        apiVersion: "example.com/v1",
        kind: "Widget",
        metadata: { name: "cw" },
        spec: { size: 2 },
        status: { conditions: [{ type: "Ready", status: "True" }] },
      },
    })) as k8s.KubernetesObject & { status?: unknown };
    expect(created.metadata?.generation).toBe(1);
    expect(created.status).toBeUndefined();
    const st = (await api.patchNamespacedCustomObjectStatus(
      { ...ref, name: "cw", body: { status: { conditions: [{ type: "Ready", status: "True" }] }, spec: { size: 9 } } },
      merge,
    )) as k8s.KubernetesObject & { spec: { size: number } };
    expect(st.metadata?.generation).toBe(1);
    expect(st.spec.size).toBe(2);
    expect(st.metadata?.resourceVersion).not.toBe(created.metadata?.resourceVersion);
    const sp = (await api.patchNamespacedCustomObject(
      { ...ref, name: "cw", body: { spec: { size: 3 }, status: { conditions: [] } } },
      merge,
    )) as k8s.KubernetesObject & { status: { conditions: unknown[] } };
    expect(sp.metadata?.generation).toBe(2);
    expect(sp.status.conditions).toHaveLength(1);
    const again = (await api.patchNamespacedCustomObject(
      { ...ref, name: "cw", body: { spec: { size: 3 } } },
      merge,
    )) as k8s.KubernetesObject;
    expect(again.metadata?.resourceVersion).toBe(sp.metadata?.resourceVersion);
  });

  it("rejects a PUT without resourceVersion, strategic merge patch, and unknown subresources", async () => {
    const api = custom();
    const put = await expectApiError(
      api.replaceNamespacedCustomObject({
        ...ref,
        name: "cw",
        body: { apiVersion: "example.com/v1", kind: "Widget", metadata: { name: "cw" }, spec: { size: 1 } },
      }),
    );
    expect(put.code).toBe(422);
    const objects = k8s.KubernetesObjectApi.makeApiClient(kc);
    const smp = await expectApiError(
      objects.patch({
        apiVersion: "example.com/v1",
        kind: "Widget",
        metadata: { name: "cw", namespace: "default" },
        spec: { size: 4 },
      } as k8s.KubernetesObject),
    );
    expect(smp.code).toBe(415);
    const read = await objects.read({
      apiVersion: "example.com/v1",
      kind: "Widget",
      metadata: { name: "cw", namespace: "default" },
    });
    expect(read.metadata?.name).toBe("cw");
    const scale = await expectApiError(api.getNamespacedCustomObjectScale({ ...ref, name: "cw" }));
    expect(scale.code).toBe(404);
  });

  it("validates with the CRD schema and CEL, naming the field", async () => {
    const api = custom();
    const bad = await expectApiError(
      api.createNamespacedCustomObject({
        ...ref,
        body: { apiVersion: "example.com/v1", kind: "Widget", metadata: { name: "big" }, spec: { size: 500 } },
      }),
    );
    expect(bad.body).toMatchObject({
      code: 422,
      reason: "Invalid",
      details: { kind: "Widget", group: "example.com", name: "big" },
    });
    expect(String(bad.body["message"])).toContain('Widget.example.com "big" is invalid');
    expect(String(bad.body["message"])).toContain("size must be at most 100");
  });
});

describe("informers and watches", () => {
  const widgets = "/apis/example.com/v1/namespaces/default/widgets";
  const custom = () => kc.makeApiClient(k8s.CustomObjectsApi);
  const ref = { group: "example.com", version: "v1", namespace: "default", plural: "widgets" };

  it("delivers add, update and delete in order, with a newer RV on delete, across server-closed watches", async () => {
    const api = custom();
    const list = () => api.listNamespacedCustomObject(ref) as Promise<k8s.KubernetesListObject<k8s.KubernetesObject>>;
    const informer = k8s.makeInformer(kc, widgets, list);
    const seen: string[] = [];
    const adds = new Map<string, number>();
    let lastRv = 0;
    informer.on("add", (o) => {
      seen.push(`add ${o.metadata?.name}`);
      adds.set(o.metadata?.name ?? "", (adds.get(o.metadata?.name ?? "") ?? 0) + 1);
    });
    informer.on("update", (o) => {
      seen.push(`update ${o.metadata?.name}`);
      lastRv = Number(o.metadata?.resourceVersion);
    });
    informer.on("delete", (o) => {
      seen.push(`delete ${o.metadata?.name}`);
      expect(Number(o.metadata?.resourceVersion)).toBeGreaterThan(lastRv);
    });
    informer.on("error", () => undefined);
    await informer.start();
    await api.createNamespacedCustomObject({
      ...ref,
      body: { apiVersion: "example.com/v1", kind: "Widget", metadata: { name: "inf1" }, spec: { size: 1 } },
    });
    await eventually(() => seen.includes("add inf1"));
    h.devkube.closeWatches();
    await api.patchNamespacedCustomObject({ ...ref, name: "inf1", body: { spec: { size: 2 } } }, merge);
    await eventually(() => seen.includes("update inf1"));
    await api.deleteNamespacedCustomObject({ ...ref, name: "inf1" });
    await eventually(() => seen.includes("delete inf1"));
    expect(seen.filter((s) => s.endsWith("inf1"))).toEqual(["add inf1", "update inf1", "delete inf1"]);
    expect(adds.get("inf1")).toBe(1);
    await informer.stop();
  });

  it("relists after 410 when the type's history was evicted, and not for a quiet type", async () => {
    await core.createNamespace({ body: { metadata: { name: "inf" } } });
    const path = "/api/v1/namespaces/inf/configmaps";
    const informer = k8s.makeInformer(kc, path, () => core.listNamespacedConfigMap({ namespace: "inf" }));
    const deletes: string[] = [];
    informer.on("delete", (o) => deletes.push(o.metadata?.name ?? ""));
    informer.on("error", () => undefined);
    await informer.start();
    const names = () =>
      informer
        .list()
        .map((o) => o.metadata?.name)
        .filter((n) => n !== "kube-root-ca.crt");
    await core.createNamespacedConfigMap({ namespace: "inf", body: { metadata: { name: "keep" } } });
    await eventually(() => names().length === 1);
    const lists = () => requests.filter((r) => r.method === "GET" && r.path === path).length;

    // quiet type: writes to other types, then the watch drops; reconnecting from the old RV works
    const before = lists();
    for (let i = 0; i < 5; i++)
      await core.createNamespacedSecret({ namespace: "inf", body: { metadata: { name: `s${i}` } } });
    h.devkube.closeWatches();
    await core.createNamespacedConfigMap({ namespace: "inf", body: { metadata: { name: "after-quiet" } } });
    await eventually(() => names().length === 2);
    expect(lists()).toBe(before);

    // busy type with a tiny window: the reconnect gets ERROR 410 and the informer relists
    await informer.stop();
    const informer2 = k8s.makeInformer(kc, path, () => core.listNamespacedConfigMap({ namespace: "inf" }));
    informer2.on("delete", (o) => deletes.push(o.metadata?.name ?? ""));
    informer2.on("error", () => undefined);
    await informer2.start();
    const names2 = () =>
      informer2
        .list()
        .map((o) => o.metadata?.name)
        .filter((n) => n !== "kube-root-ca.crt");
    await eventually(() => names2().length === 2);
    h.devkube.setWatchHistoryLimit(2);
    const paused = lists();
    // writes the informer does not see (another namespace) push its RV out of the window
    for (let i = 0; i < 4; i++)
      await core.createNamespacedConfigMap({ namespace: "default", body: { metadata: { name: `busy${i}` } } });
    h.devkube.closeWatches();
    await core.createNamespacedConfigMap({ namespace: "inf", body: { metadata: { name: "after-410" } } });
    await eventually(() => names2().length === 3);
    expect(lists()).toBeGreaterThan(paused);
    expect(deletes).toEqual([]);
    h.devkube.setWatchHistoryLimit(1000);
    await informer2.stop();
  });

  it("reports objects leaving a label selector as deleted", async () => {
    const path = "/api/v1/namespaces/default/configmaps";
    const informer = k8s.makeInformer(
      kc,
      path,
      () => core.listNamespacedConfigMap({ namespace: "default", labelSelector: "team=a" }),
      "team=a",
    );
    const deleted: string[] = [];
    informer.on("delete", (o) => deleted.push(o.metadata?.name ?? ""));
    informer.on("error", () => undefined);
    await informer.start();
    await core.createNamespacedConfigMap({
      namespace: "default",
      body: { metadata: { name: "sel", labels: { team: "a" } } },
    });
    await eventually(() => informer.list().some((o) => o.metadata?.name === "sel"));
    await core.patchNamespacedConfigMap(
      { name: "sel", namespace: "default", body: { metadata: { labels: { team: "b" } } } },
      merge,
    );
    await eventually(() => deleted.includes("sel"));
    await informer.stop();
  });

  it("serves raw watch semantics: synthetic ADDED, 410 Expired, bookmarks, timeouts", async () => {
    const watch = new k8s.Watch(kc);
    const events: { type: string; obj: Record<string, any> }[] = []; // eslint-disable-line @typescript-eslint/no-explicit-any
    let done = false;
    await watch.watch(
      "/api/v1/namespaces",
      { resourceVersion: "0", timeoutSeconds: 1, allowWatchBookmarks: true },
      (type, obj) => events.push({ type, obj }),
      () => {
        done = true;
      },
    );
    await eventually(() => done);
    expect(events.filter((e) => e.type === "ADDED").map((e) => e.obj["metadata"].name)).toContain("default");
    expect(events.some((e) => e.type === "BOOKMARK")).toBe(true);

    h.devkube.setWatchHistoryLimit(1);
    for (let i = 0; i < 3; i++)
      await core.createNamespacedConfigMap({ namespace: "default", body: { metadata: { name: `evict${i}` } } });
    const expired: { type: string; obj: Record<string, any> }[] = []; // eslint-disable-line @typescript-eslint/no-explicit-any
    let ended = false;
    await watch.watch(
      "/api/v1/namespaces/default/configmaps",
      { resourceVersion: "1" },
      (type, obj) => expired.push({ type, obj }),
      () => {
        ended = true;
      },
    );
    await eventually(() => ended);
    expect(expired[0]).toMatchObject({ type: "ERROR", obj: { kind: "Status", reason: "Expired", code: 410 } });
    h.devkube.setWatchHistoryLimit(1000);
  });
});

describe("leases and events", () => {
  it("enforces MicroTime with six fractional digits", async () => {
    const coord = kc.makeApiClient(k8s.CoordinationV1Api);
    const ok = await coord.createNamespacedLease({
      namespace: "default",
      body: {
        metadata: { name: "leader" },
        spec: { holderIdentity: "a", leaseDurationSeconds: 15, renewTime: new k8s.V1MicroTime() },
      },
    });
    expect(
      String(ok.spec?.renewTime instanceof Date ? (ok.spec.renewTime as Date).toISOString() : ok.spec?.renewTime),
    ).toBeTruthy();
    const raw = await expectApiError(
      coord.createNamespacedLease({
        namespace: "default",
        body: { metadata: { name: "bad" }, spec: { renewTime: new Date() as k8s.V1MicroTime } },
      }),
    );
    expect(raw.code).toBe(400);
    expect(raw.body["message"]).toContain('as ".000000"');
  });

  it("lets exactly one of two racing electors win", async () => {
    const coord = kc.makeApiClient(k8s.CoordinationV1Api);
    const lease = await coord.readNamespacedLease({ name: "leader", namespace: "default" });
    const take = (who: string) =>
      coord.replaceNamespacedLease({
        name: "leader",
        namespace: "default",
        body: { ...lease, spec: { ...lease.spec, holderIdentity: who, renewTime: new k8s.V1MicroTime() } },
      });
    const results = await Promise.allSettled([take("b"), take("c")]);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    const loser = results.find((r) => r.status === "rejected") as PromiseRejectedResult;
    expect(apiError(loser.reason).code).toBe(409);
  });

  it("stores events.k8s.io events once, visible as core events with involvedObject selectors", async () => {
    const events = kc.makeApiClient(k8s.EventsV1Api);
    await events.createNamespacedEvent({
      namespace: "default",
      body: {
        metadata: { name: "e1" },
        eventTime: new k8s.V1MicroTime(),
        reportingController: "mds.dev/operator",
        reportingInstance: "i1",
        action: "Sync",
        reason: "Created",
        type: "Normal",
        note: "made it",
        regarding: { kind: "Widget", name: "cw", namespace: "default", uid: "u-1" },
      },
    });
    const list = await core.listNamespacedEvent({
      namespace: "default",
      fieldSelector: "involvedObject.name=cw,involvedObject.kind=Widget",
    });
    expect(list.items.map((e) => [e.metadata?.name, e.message, e.involvedObject.uid])).toEqual([
      ["e1", "made it", "u-1"],
    ]);
    const missing = await expectApiError(
      events.createNamespacedEvent({
        namespace: "default",
        body: {
          metadata: { name: "e2" },
          eventTime: new k8s.V1MicroTime(),
          reportingController: "x",
          reportingInstance: "y",
          reason: "R",
          type: "Normal",
          regarding: {},
        } as k8s.EventsV1Event,
      }),
    );
    expect(missing.code).toBe(422);
    expect(String(missing.body["message"])).toContain("action: Required value");
  });
});

describe("request traces (kubectl's patch types, from the request log)", () => {
  it("client-side apply patches core kinds with SMP and custom resources with merge patch", async () => {
    const cm = (v: string) => `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: traced\ndata:\n  v: "${v}"\n`;
    const w = (size: number) =>
      `apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: traced\nspec:\n  size: ${size}\n`;
    await h.ok(["apply", "-f", "-"], cm("1"));
    await h.ok(["apply", "-f", "-"], w(1));
    const from = requests.length;
    await h.ok(["apply", "-f", "-"], cm("2"));
    await h.ok(["apply", "-f", "-"], w(2));
    const patches = requests
      .slice(from)
      .filter((r) => r.method === "PATCH")
      .map((r) => [r.path.split("?")[0], r.contentType]);
    expect(patches).toEqual([
      ["/api/v1/namespaces/default/configmaps/traced", "application/strategic-merge-patch+json"],
      ["/apis/example.com/v1/namespaces/default/widgets/traced", "application/merge-patch+json"],
    ]);
  });
});

describe("CRD deletion", () => {
  it("sends a DELETE to informers for every CR, then the endpoints are gone", async () => {
    const api = kc.makeApiClient(k8s.CustomObjectsApi);
    const ref = { group: "example.com", version: "v1", namespace: "default", plural: "widgets" };
    const informer = k8s.makeInformer(
      kc,
      "/apis/example.com/v1/namespaces/default/widgets",
      () => api.listNamespacedCustomObject(ref) as Promise<k8s.KubernetesListObject<k8s.KubernetesObject>>,
    );
    const deleted: string[] = [];
    informer.on("delete", (o) => deleted.push(o.metadata?.name ?? ""));
    informer.on("error", () => undefined);
    await informer.start();
    const before = informer.list().map((o) => o.metadata?.name ?? "");
    expect(before.length).toBeGreaterThan(0);
    await h.ok(["delete", "crd", "widgets.example.com"]);
    await eventually(() => before.every((n) => deleted.includes(n)));
    await expect(api.listNamespacedCustomObject(ref)).rejects.toMatchObject({ code: 404 });
    await informer.stop();
  });
});
