import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, startHarness, widget, WIDGET_CRD, type Harness } from "./helpers.ts";

// devkube driven by the real kubectl 1.32 through the reference's compatibility list (§4).

let h: Harness;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = Record<string, any>;
const json = async (args: string[]): Promise<Json> => JSON.parse(await h.ok([...args, "-o", "json"])) as Json;

beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.close();
});

describe("transport and discovery", () => {
  it("lists the seeded namespaces over HTTPS with the token", async () => {
    const out = await h.ok(["get", "ns"]);
    for (const ns of ["default", "kube-public", "kube-system", "kube-node-lease"]) expect(out).toContain(ns);
    expect(out).toMatch(/NAME\s+STATUS\s+AGE/);
  });

  it("authenticates with the client certificate of the cert context", async () => {
    const out = await h.ok(["--context=cert", "get", "ns", "-o", "name"]);
    expect(out).toContain("namespace/kube-system");
    expect(await h.ok(["--context=cert", "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"])).toBe(
      "devkube-admin",
    );
  });

  it("rejects a wrong token with kubectl's login message", async () => {
    const bad = h.devkube.kubeconfig.replace(h.devkube.token, "wrong-token");
    const p = await h.file("bad-kubeconfig", bad);
    const { runKubectl } = await import("../support/kubectl.ts");
    const r = await runKubectl(p, ["get", "ns"], { cacheDir: `${h.dir}/bad-cache` });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("You must be logged in to the server");
  });

  it("reports server version 1.32", async () => {
    const v = JSON.parse(await h.ok(["version", "-o", "json"])) as { serverVersion: { major: string; minor: string } };
    expect(v.serverVersion).toMatchObject({ major: "1", minor: "32" });
  });
});

describe("CRD lifecycle and apply", () => {
  it("creates the CRD and it is Established at once", async () => {
    const f = await h.file("crd.yaml", WIDGET_CRD);
    expect(await h.ok(["apply", "-f", f])).toContain(
      "customresourcedefinition.apiextensions.k8s.io/widgets.example.com created",
    );
    expect(await h.ok(["wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=20s"])).toContain(
      "condition met",
    );
    expect(await h.ok(["api-resources", "--api-group=example.com"])).toMatch(
      /widgets\s+wg\s+example.com\/v1\s+true\s+Widget/,
    );
  });

  it("rejects unknown nested fields of built-in kinds with Strict, as typed decoding does", async () => {
    const typo = await h.kubectl(
      ["apply", "-f", "-"],
      WIDGET_CRD.replace("      jsonPath: .spec.size\n", "      jsonPath: .spec.size\n      prority: 1\n").replace(
        "widgets.example.com",
        "widgets.example.com",
      ),
    );
    expect(typo.code).toBe(1);
    expect(typo.stderr).toContain('unknown field "spec.versions[0].additionalPrinterColumns[0].prority"');
    const lease = await h.kubectl(
      ["apply", "-f", "-"],
      "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: l1\nspec:\n  holderIdentity: a\n  holder: b\n",
    );
    expect(lease.stderr).toContain('unknown field "spec.holder"');
  });

  it("rejects an invalid CRD with 'is invalid'", async () => {
    const bad = WIDGET_CRD.replace("name: widgets.example.com", "name: gadgets.example.com");
    const r = await h.kubectl(["apply", "-f", "-"], bad);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("is invalid");
    expect(r.stderr).toContain('must be spec.names.plural+"."+spec.group');
  });

  it("creates, leaves unchanged and configures a CR with client-side apply", async () => {
    const f = await h.file("w1.yaml", widget("w1", { size: 3, color: "red" }, { app: "demo" }));
    expect(await h.ok(["apply", "-f", f])).toContain("widget.example.com/w1 created");
    expect(await h.ok(["apply", "-f", f])).toContain("widget.example.com/w1 unchanged");
    const f2 = await h.file("w1b.yaml", widget("w1", { size: 5, color: "blue" }, { app: "demo" }));
    expect(await h.ok(["apply", "-f", f2])).toContain("widget.example.com/w1 configured");
    const w = await json(["get", "widget", "w1"]);
    expect(w["spec"]).toEqual({ size: 5, color: "blue" });
    expect(w["metadata"].generation).toBe(2);
  });

  it("rejects unknown fields with Strict and prunes them with --validate=false", async () => {
    const doc = widget("w2", { size: 2, bogus: true });
    const r = await h.kubectl(["apply", "-f", "-"], doc);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('strict decoding error: unknown field "spec.bogus"');
    await h.ok(["apply", "--validate=false", "-f", "-"], doc);
    const w = await json(["get", "widget", "w2"]);
    expect(w["spec"]).toEqual({ size: 2 });
  });

  it("reports schema violations naming the field", async () => {
    const r = await h.kubectl(["apply", "-f", "-"], widget("w3", { size: "x" }));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("is invalid");
    expect(r.stderr).toContain("spec.size");
    const cel = await h.kubectl(["apply", "-f", "-"], widget("w3", { size: 1000 }));
    expect(cel.code).toBe(1);
    expect(cel.stderr).toContain("size must be at most 100");
  });

  it("defaults spec.size", async () => {
    await h.ok(["apply", "-f", "-"], widget("w4", { color: "green" }));
    expect((await json(["get", "widget", "w4"]))["spec"]).toEqual({ color: "green", size: 1 });
  });

  it("applies ConfigMaps with strategic merge patch", async () => {
    const cm = (data: Record<string, string>, app: string) =>
      `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm1\n  labels:\n    app: ${app}\ndata: ${JSON.stringify(data)}\n`;
    expect(await h.ok(["apply", "-f", "-"], cm({ a: "1", b: "2" }, "demo"))).toContain("configmap/cm1 created");
    expect(await h.ok(["apply", "-f", "-"], cm({ a: "1", c: "3" }, "demo2"))).toContain("configmap/cm1 configured");
    const got = await json(["get", "cm", "cm1"]);
    expect(got["data"]).toEqual({ a: "1", c: "3" });
    expect(got["metadata"].labels).toEqual({ app: "demo2" });
  });

  it("drops emptied metadata maps, as ObjectMeta's omitempty does", async () => {
    const cm = (labels: string) =>
      `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-empty\n${labels}data: { x: "1" }\n`;
    await h.ok(["apply", "--server-side", "-f", "-"], cm("  labels: { a: b }\n"));
    await h.ok(["apply", "--server-side", "-f", "-"], cm(""));
    expect((await json(["get", "cm", "cm-empty"]))["metadata"]).not.toHaveProperty("labels");
  });

  it("merges ServiceAccount finalizers with SMP directives", async () => {
    const sa = (fins: string[], secrets: string[]) =>
      `apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: sa1\n  finalizers: ${JSON.stringify(fins)}\nimagePullSecrets: ${JSON.stringify(secrets.map((name) => ({ name })))}\n`;
    await h.ok(["apply", "-f", "-"], sa(["a.example.com/x", "b.example.com/y"], ["s1"]));
    await h.ok(["apply", "-f", "-"], sa(["b.example.com/y", "c.example.com/z"], ["s2", "s3"]));
    const got = await json(["get", "sa", "sa1"]);
    expect(got["metadata"].finalizers).toEqual(["b.example.com/y", "c.example.com/z"]);
    expect(got["imagePullSecrets"]).toEqual([{ name: "s2" }, { name: "s3" }]);
    await h.ok(["patch", "sa", "sa1", "--type=merge", "-p", '{"metadata":{"finalizers":null}}']);
  });

  it("server-side applies, removes dropped fields, and reports conflicts", async () => {
    const f = widget("ssa1", { size: 3, color: "red" });
    expect(await h.ok(["apply", "--server-side", "-f", "-"], f)).toContain("serverside-applied");
    let w = await json(["get", "widget", "ssa1", "--show-managed-fields"]);
    expect(
      w["metadata"].managedFields.some(
        (m: { manager: string; operation: string }) => m.manager === "kubectl" && m.operation === "Apply",
      ),
    ).toBe(true);
    await h.ok(["apply", "--server-side", "-f", "-"], widget("ssa1", { size: 3 }));
    w = await json(["get", "widget", "ssa1"]);
    expect(w["spec"]).toEqual({ size: 3 });
    await h.ok(["patch", "widget", "ssa1", "--type=merge", "-p", '{"spec":{"size":7}}']);
    const r = await h.kubectl(["apply", "--server-side", "-f", "-"], widget("ssa1", { size: 4 }));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("conflict");
    await h.ok(["apply", "--server-side", "--force-conflicts", "-f", "-"], widget("ssa1", { size: 4 }));
    expect((await json(["get", "widget", "ssa1"]))["spec"]["size"]).toBe(4);
  });

  it("moves from client-side to server-side apply", async () => {
    await h.ok(["apply", "-f", "-"], widget("mig", { size: 2 }));
    expect(await h.ok(["apply", "--server-side", "-f", "-"], widget("mig", { size: 3 }))).toContain(
      "serverside-applied",
    );
    expect((await json(["get", "widget", "mig"]))["spec"]["size"]).toBe(3);
  });

  it("creates ConfigMaps, Secrets and Namespaces imperatively (protobuf bodies)", async () => {
    expect(await h.ok(["create", "cm", "imp", "--from-literal=a=b"])).toContain("configmap/imp created");
    expect((await json(["get", "cm", "imp"]))["data"]).toEqual({ a: "b" });
    expect(await h.ok(["create", "secret", "generic", "sec", "--from-literal=token=s3cr3t"])).toContain(
      "secret/sec created",
    );
    expect((await json(["get", "secret", "sec"]))["data"]).toEqual({ token: Buffer.from("s3cr3t").toString("base64") });
    expect(await h.ok(["create", "ns", "imperative"])).toContain("namespace/imperative created");
  });
});

describe("get and describe", () => {
  it("prints printer columns and READY after a status patch", async () => {
    let out = await h.ok(["get", "widgets"]);
    expect(out).toMatch(/NAME\s+SIZE\s+READY\s+AGE/);
    expect(out).toMatch(/w1\s+5\s+\d+s/); // a missing value is a null cell, printed blank
    await h.ok([
      "patch",
      "widget",
      "w1",
      "--subresource=status",
      "--type=merge",
      "-p",
      '{"status":{"conditions":[{"type":"Ready","status":"True"}]}}',
    ]);
    out = await h.ok(["get", "widgets"]);
    expect(out).toMatch(/w1\s+5\s+True/);
    expect(await h.ok(["get", "widgets", "-o", "wide"])).toMatch(/NAME\s+SIZE\s+READY\s+COLOR\s+AGE/);
    expect(await h.ok(["get", "widgets", "--show-labels"])).toContain("app=demo");
    expect(await h.ok(["get", "widgets", "-L", "app"])).toMatch(/APP/);
    expect(await h.ok(["get", "widgets", "-A"])).toMatch(/NAMESPACE\s+NAME/);
  });

  it("filters by label and field selectors", async () => {
    expect(await h.ok(["get", "widgets", "-l", "app=demo", "-o", "name"])).toBe("widget.example.com/w1\n");
    expect(await h.ok(["get", "widgets", "-l", "app in (demo,x)", "-o", "name"])).toBe("widget.example.com/w1\n");
    expect(await h.ok(["get", "widgets", "-l", "!app", "-o", "name"])).not.toContain("w1");
    expect(await h.ok(["get", "widgets", "--field-selector", "metadata.name=w4", "-o", "name"])).toBe(
      "widget.example.com/w4\n",
    );
    const r = await h.kubectl(["get", "widgets", "--field-selector", "spec.size=3"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("Error from server (BadRequest)");
  });

  it("prints lists as JSON with kinds filled in", async () => {
    const list = await json(["get", "widgets"]);
    expect(list["kind"]).toBe("List");
    expect(list["items"].length).toBeGreaterThan(1);
    const cms = await json(["get", "cm"]);
    expect(cms["items"][0].kind).toBe("ConfigMap");
  });

  it("resolves resource names every way", async () => {
    for (const name of ["widgets.v1.example.com", "wg", "widget", "widgets.example.com"]) {
      expect(await h.ok(["get", name, "w1", "-o", "name"])).toBe("widget.example.com/w1\n");
    }
  });

  it("explains CRD fields from the OpenAPI schema", async () => {
    const out = await h.ok(["explain", "widget.spec"]);
    expect(out).toContain("Desired state of the widget");
    expect(out).toContain("How big the widget is");
  });

  it("describes a widget with its events (events.k8s.io written, core read)", async () => {
    const w = await json(["get", "widget", "w1"]);
    const ev = {
      apiVersion: "events.k8s.io/v1",
      kind: "Event",
      metadata: { name: "w1.ev1", namespace: "default" },
      eventTime: "2026-11-21T08:00:00.000000Z",
      reportingController: "mds.dev/operator",
      reportingInstance: "op-1",
      action: "Reconcile",
      reason: "Synced",
      type: "Normal",
      note: "all good",
      regarding: {
        apiVersion: "example.com/v1",
        kind: "Widget",
        name: "w1",
        namespace: "default",
        uid: w["metadata"].uid,
      },
    };
    await h.ok(["create", "-f", "-"], JSON.stringify(ev));
    const out = await h.ok(["describe", "widget", "w1"]);
    expect(out).toContain("Size:");
    expect(out).toMatch(/Normal\s+Synced\s+.*all good/);
    expect(await h.ok(["describe", "cm", "cm1"])).toMatch(/Data\n====/);
  });
});

describe("delete, finalizers, GC", () => {
  it("deletes a CR without finalizers", async () => {
    expect(await h.ok(["delete", "widget", "w4"])).toContain('widget.example.com "w4" deleted');
    expect((await h.kubectl(["get", "widget", "w4"])).stderr).toContain('widgets.example.com "w4" not found');
  });

  it("blocks on a finalizer until it is removed; no new finalizers while deleting", async () => {
    await h.ok(["apply", "-f", "-"], widget("fin", { size: 1 }, {}, "  finalizers: [example.com/hold]"));
    const deleting = h.kubectl(["delete", "widget", "fin", "--timeout=30s"]);
    const w = await eventually(async () => {
      const o = await json(["get", "widget", "fin"]);
      if (!o["metadata"].deletionTimestamp) throw new Error("not deleting yet");
      return o;
    });
    expect(w["metadata"].generation).toBe(2);
    const add = await h.kubectl([
      "patch",
      "widget",
      "fin",
      "--type=merge",
      "-p",
      '{"metadata":{"finalizers":["example.com/hold","example.com/more"]}}',
    ]);
    expect(add.code).toBe(1);
    expect(add.stderr).toContain("no new finalizers can be added if the object is being deleted");
    await h.ok(["patch", "widget", "fin", "--type=merge", "-p", '{"metadata":{"finalizers":null}}']);
    const r = await deleting;
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("deleted");
  });

  it("collects dependents: background, foreground and orphan", async () => {
    const owner = async (name: string) => {
      await h.ok(["apply", "-f", "-"], widget(name, { size: 1 }));
      const uid = (await json(["get", "widget", name]))["metadata"].uid as string;
      const child = {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: {
          name: `${name}-child`,
          ownerReferences: [{ apiVersion: "example.com/v1", kind: "Widget", name, uid, blockOwnerDeletion: true }],
        },
        data: { x: "y" },
      };
      await h.ok(["apply", "-f", "-"], JSON.stringify(child));
    };
    await owner("gc-bg");
    await h.ok(["delete", "widget", "gc-bg"]);
    await eventually(async () => (await h.kubectl(["get", "cm", "gc-bg-child"])).code === 1);

    await owner("gc-fg");
    await h.ok(["delete", "widget", "gc-fg", "--cascade=foreground"]);
    await eventually(async () => (await h.kubectl(["get", "cm", "gc-fg-child"])).code === 1);
    await eventually(async () => (await h.kubectl(["get", "widget", "gc-fg"])).code === 1);

    await owner("gc-or");
    await h.ok(["delete", "widget", "gc-or", "--cascade=orphan"]);
    await eventually(async () => (await h.kubectl(["get", "widget", "gc-or"])).code === 1);
    const child = await json(["get", "cm", "gc-or-child"]);
    expect(child["metadata"].ownerReferences).toBeUndefined();
  });

  it("deletes a namespace with its contents; creating in a terminating namespace is forbidden", async () => {
    await h.ok(["create", "ns", "demo"]);
    await h.ok(
      ["apply", "-n", "demo", "-f", "-"],
      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  finalizers: [example.com/hold]\n",
    );
    await h.ok(["delete", "ns", "demo", "--wait=false"]);
    expect((await json(["get", "ns", "demo"]))["status"].phase).toBe("Terminating");
    const r = await h.kubectl(
      ["apply", "-n", "demo", "-f", "-"],
      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: late\n",
    );
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("because it is being terminated");
    await h.ok(["patch", "cm", "held", "-n", "demo", "--type=merge", "-p", '{"metadata":{"finalizers":null}}']);
    await eventually(async () => (await h.kubectl(["get", "ns", "demo"])).code === 1);
  });
});

describe("wait and watch", () => {
  it("waits for a condition, for a jsonpath value and for deletion", async () => {
    await h.ok(["apply", "-f", "-"], widget("wt", { size: 3 }, {}, "  finalizers: [example.com/hold]"));
    const waiting = h.kubectl(["wait", "--for=condition=Ready", "widget/wt", "--timeout=30s"]);
    await h.ok([
      "patch",
      "widget",
      "wt",
      "--subresource=status",
      "--type=merge",
      "-p",
      '{"status":{"conditions":[{"type":"Ready","status":"True","observedGeneration":1}]}}',
    ]);
    expect((await waiting).stdout).toContain("condition met");
    expect(await h.ok(["wait", "--for=jsonpath={.spec.size}=3", "widget/wt", "--timeout=10s"])).toContain(
      "condition met",
    );
    await h.ok(["patch", "widget", "wt", "--type=merge", "-p", '{"spec":{"size":4}}']);
    const stale = await h.kubectl(["wait", "--for=condition=Ready", "widget/wt", "--timeout=2s"]);
    expect(stale.code).toBe(1);
    await h.ok(["delete", "widget", "wt", "--wait=false"]);
    const gone = h.kubectl(["wait", "--for=delete", "widget/wt", "--timeout=30s"]);
    await h.ok(["patch", "widget", "wt", "--type=json", "-p", '[{"op":"remove","path":"/metadata/finalizers"}]']);
    expect((await gone).code).toBe(0);
  });

  it("streams get -w rows", async () => {
    const { spawn } = await import("node:child_process");
    const { kubectlPath } = await import("@mds/devkube/kubectl-path");
    const child = spawn(await kubectlPath(), [
      `--kubeconfig=${h.devkube.kubeconfigPath}`,
      `--cache-dir=${h.dir}/kube-cache`,
      "get",
      "widgets",
      "-w",
      "--output-watch-events",
    ]);
    let out = "";
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
    });
    await eventually(() => out.includes("w1"));
    await h.ok(["patch", "widget", "w1", "--type=merge", "-p", '{"spec":{"size":6}}']);
    await eventually(() => /MODIFIED\s+w1\s+6/.test(out));
    child.kill();
  });
});

describe("CRD versions", () => {
  it("serves every version over one storage (conversion None), pruned for the version read", async () => {
    const crd = WIDGET_CRD.replaceAll("widgets", "gadgets")
      .replaceAll("widget", "gadget")
      .replace("kind: Widget", "kind: Gadget")
      .replace("shortNames: [wg]", "shortNames: [gd]")
      .replace(
        "      status: {}\n",
        "      status: {}\n      scale:\n        specReplicasPath: .spec.size\n        statusReplicasPath: .status.replicas\n",
      )
      .replace(
        "  - name: v1\n    served: true\n    storage: true\n",
        "  - name: v1beta1\n    served: true\n    storage: false\n    schema:\n      openAPIV3Schema:\n        type: object\n        x-kubernetes-preserve-unknown-fields: true\n  - name: v1\n    served: true\n    storage: true\n",
      );
    await h.ok(["apply", "-f", "-"], crd);
    await h.ok(
      ["apply", "-f", "-"],
      "apiVersion: example.com/v1beta1\nkind: Gadget\nmetadata: {name: g1}\nspec: {size: 2, extra: true}\n",
    );
    const v1 = await json(["get", "gadgets.v1.example.com", "g1"]);
    expect([v1["apiVersion"], v1["spec"]]).toEqual(["example.com/v1", { size: 2 }]);
    const beta = await json(["get", "gadgets.v1beta1.example.com", "g1"]);
    expect([beta["apiVersion"], beta["spec"]]).toEqual(["example.com/v1beta1", { size: 2, extra: true }]);
  });

  it("scales through the scale subresource", async () => {
    expect(await h.ok(["scale", "gadget", "g1", "--replicas=5"])).toContain("gadget.example.com/g1 scaled");
    expect((await json(["get", "gadget", "g1"]))["spec"]["size"]).toBe(5);
    const scale = JSON.parse(
      await h.ok(["get", "--raw", "/apis/example.com/v1/namespaces/default/gadgets/g1/scale"]),
    ) as Record<string, unknown>;
    expect(scale).toMatchObject({
      kind: "Scale",
      apiVersion: "autoscaling/v1",
      spec: { replicas: 5 },
      status: { replicas: 0 },
    });
  });
});

describe("CRD deletion", () => {
  it("removes every CR and the endpoints", async () => {
    await h.ok(["delete", "crd", "widgets.example.com", "--timeout=30s"]);
    const r = await h.kubectl(["get", "widgets"]);
    expect(r.code).toBe(1);
  });
});
