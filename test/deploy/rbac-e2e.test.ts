// The operator runs with exactly the RBAC that deploy/ binds to its ServiceAccount, in both install modes (all
// namespaces; single-namespace with Roles only, installed into an application namespace): `mds operator`'s runtime
// (config parsing, leader election through the Lease, createOperator) authenticates to devkube with a token of the
// mds-operator ServiceAccount, devkube enforces the Roles and bindings applied from deploy/, and a recording proxy
// notes every request and answer. The real service runs behind it. It takes a Project and Databases through creation, a deleted and an edited Secret,
// a restore, and both deletion policies. Anything the operator lacks is a 403 and fails the test; any granted
// verb it never uses fails it too, so the manifests grant exactly what the operator does.
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { Writable } from "node:stream";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments, stringify } from "yaml";
import { parseOperatorConfig } from "../../src/cli/operator-config.ts";
import { createOperatorWithKinds, startOperatorRuntime, type OperatorRuntime } from "../../src/cli/operator.ts";
import { startDevkube, type Devkube } from "@mds/devkube";
import { ensureTls } from "@mds/devkube/tls";
import { parseKubeConfig, type KubeConfig } from "../../src/kube/kubeconfig.ts";
import { startTestService, type TestService } from "../support/test-service.ts";
import { eventually } from "../support/eventually.ts";
import { serviceWebhook, type WebhookProcess } from "../support/webhook-process.ts";
import { containerOptions } from "./container-options.ts";
import { kubectl } from "./kubectl.ts";
import { authorize, grantsFor, startRecordingProxy, type Grant, type RecordingProxy, type RequestAttributes } from "./rbac.ts";

const repoRoot = fileURLToPath(new URL("../../", import.meta.url));

interface Mode {
  name: string;
  /** A kustomization to render; `namespace` is set on top of it (the operator's namespace). */
  install: string;
  namespace: string;
  /** Where the test's resources live, and the namespaces the Deployment must make the operator watch (undefined: all). */
  resourceNamespace: string;
  watch: string | undefined;
  /** "full": every kind's life; "consumers": a rotation that restarts a Deployment, a StatefulSet and a DaemonSet. */
  flow: "full" | "consumers";
}
const modes: Mode[] = [
  { name: "all namespaces (deploy/)", install: "deploy", namespace: "mds-system", resourceNamespace: "shop", watch: undefined, flow: "full" },
  { name: "single namespace (overlays/single-namespace) in an application namespace", install: "deploy/overlays/single-namespace", namespace: "team-a", resourceNamespace: "team-a", watch: "team-a", flow: "full" },
  // The rotation-consumers components: what they add is used, and enough, for a rotation that rolls every kind.
  { name: "rotation consumers (overlays/with-rotation-consumers)", install: "deploy/overlays/with-rotation-consumers", namespace: "mds-system", resourceNamespace: "shop", watch: undefined, flow: "consumers" },
  { name: "rotation consumers in one namespace (overlays/single-namespace-rotation-consumers)", install: "deploy/overlays/single-namespace-rotation-consumers", namespace: "team-a", resourceNamespace: "team-a", watch: "team-a", flow: "consumers" },
];

let ns: string;
let dir: string;
let devkube: Devkube;
let service: TestService;
let proxy: RecordingProxy;
let kubeConfig: KubeConfig | undefined;
let runtime: OperatorRuntime | undefined;
let grants: Grant[];
let logs: string[] = [];
let webhook: WebhookProcess | undefined;

const admin = async (args: string[], input?: string) => {
  const r = await kubectl(args, { kubeconfig: devkube.kubeconfigPath, ...(input === undefined ? {} : { input }) });
  if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")} failed: ${r.stderr.trim()}`);
  return r.stdout;
};
const getJson = async (args: string[]) => JSON.parse(await admin([...args, "-o", "json"])) as Record<string, unknown> & { status?: Record<string, unknown>; data?: Record<string, string> };
const apply = (...objects: object[]) => admin(["apply", "-f", "-"], objects.map((o) => stringify(o)).join("---\n"));
const exists = async (args: string[]) => (await kubectl(["get", ...args, "-o", "name"], { kubeconfig: devkube.kubeconfigPath })).code === 0;
const api = async (method: string, path: string) => {
  const res = await fetch(`${service.url}${path}`, { method, headers: { authorization: `Bearer ${service.token}` } });
  return (await res.json()) as { data: unknown };
};

// A request the RBAC refused ends a wait at once with what was refused: no retry fixes it.
const refused = () =>
  proxy !== undefined && proxy.denied.length > 0
    ? new Error(`the operator was refused: ${proxy.denied.map((d) => `${d.verb} ${d.group ? `${d.group}/` : ""}${d.resource}${d.subresource ? `/${d.subresource}` : ""}${d.namespace ? ` in ${d.namespace}` : ""}`).join(", ")}`)
    : undefined;

const meta = (name: string) => ({ name, namespace: ns });
// Retain: the Retain Database below keeps its remote database, which a Delete Project would wait for forever.
const project = () => ({ apiVersion: "mds.dev/v1alpha1", kind: "Project", metadata: meta("shop"), spec: { region: "us-east-1", deletionPolicy: "Retain" } });
const database = (name: string, deletionPolicy: "Retain" | "Delete") => ({
  apiVersion: "mds.dev/v1alpha1",
  kind: "Database",
  metadata: meta(name),
  spec: { projectRef: { name: "shop" }, deletionPolicy },
});

async function waitReady(name: string): Promise<{ id: string; secretName: string }> {
  return eventually(
    async () => {
      const status = (await getJson(["-n", ns, "get", "mdsdb", name])).status as { id: string; secretName: string; conditions?: { type: string; status: string }[] } | undefined;
      if (status?.conditions?.find((c) => c.type === "Ready")?.status !== "True") throw new Error(`${name} not Ready: ${JSON.stringify(status?.conditions)} ${JSON.stringify(proxy.denied)}`);
      return status;
    },
    { stopWhen: refused, what: `Database ${name} Ready`, timeoutMs: 60_000 },
  );
}

/** `kubectl kustomize` of the mode's install with the operator's namespace set (a temporary overlay). */
async function render(mode: Mode): Promise<{ kind: string; metadata: { name: string; namespace?: string } }[]> {
  const overlay = join(dir, "overlay");
  await mkdir(overlay, { recursive: true });
  await writeFile(join(overlay, "kustomization.yaml"), stringify({ apiVersion: "kustomize.config.k8s.io/v1beta1", kind: "Kustomization", namespace: mode.namespace, resources: [relative(overlay, join(repoRoot, mode.install))] }));
  const result = await kubectl(["kustomize", overlay]);
  if (result.code !== 0) throw new Error(`kubectl kustomize failed: ${result.stderr}`);
  return parseAllDocuments(result.stdout).map((d) => d.toJS() as { kind: string; metadata: { name: string; namespace?: string } });
}

async function setup(mode: Mode): Promise<void> {
  ns = mode.resourceNamespace;
  logs = [];
  dir = await mkdtemp(join(tmpdir(), "mds-rbac-e2e-"));
  // Each assigned as soon as it runs, so teardown stops it even when the other fails to start.
  // The conversion webhook the CRDs name, in the operator's namespace as the install puts it.
  const webhookAt = await serviceWebhook(mode.namespace);
  await Promise.all([
    startDevkube({ dir: join(dir, "kube"), services: webhookAt.services }).then((d) => (devkube = d)),
    startTestService().then((s) => (service = s)),
  ]);

  // The install as devkube can hold it (namespace, CRDs, ServiceAccount, RBAC, the deletion-protection policy, which
  // the operator must live with); the grants come from the same objects.
  const rendered = await render(mode);
  grants = grantsFor(rendered as Parameters<typeof grantsFor>[0], { namespace: mode.namespace, name: "mds-operator" });
  const installable = ["Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"];
  await apply(...rendered.filter((o) => installable.includes(o.kind)));
  // The webhook runs as its own ServiceAccount, so the install's RBAC for it is proven enough: its certificate Secret
  // made and read, the caBundle patched into the six CRDs (start waits for that).
  const webhookToken = (await admin(["-n", mode.namespace, "create", "token", "mds-webhook", "--duration=2h"])).trim();
  const webhookKubeconfig = join(dir, "webhook-kubeconfig");
  await writeFile(webhookKubeconfig, devkube.kubeconfig.replace(devkube.token, webhookToken));
  webhook = await webhookAt.start(webhookKubeconfig);
  await eventually(() => admin(["get", "mdsdb,mdsproject,mdsrestore", "-A"]), { stopWhen: refused, what: "CRDs served" });
  if (!(await exists(["namespace", ns]))) await admin(["create", "namespace", ns]);
  await apply({ apiVersion: "v1", kind: "Secret", metadata: { name: "mds-credentials", namespace: mode.namespace }, stringData: { token: service.token } });
  // The operator's own token serves only its namespace: a team namespace holds its own (which the operator guards
  // with a finalizer while resources need it).
  if (ns !== mode.namespace) await apply({ apiVersion: "v1", kind: "Secret", metadata: { name: "mds-credentials", namespace: ns }, stringData: { token: service.token } });

  // The operator authenticates as its ServiceAccount with a bound token (as a projected token in a pod would), so
  // devkube's RBAC authorizer judges every request against the Roles and bindings just applied.
  const token = (await admin(["-n", mode.namespace, "create", "token", "mds-operator", "--duration=2h"])).trim();
  const tls = await ensureTls(join(dir, "kube"), "127.0.0.1");
  proxy = await startRecordingProxy({ upstream: devkube.url, ca: tls.caCert, cert: tls.serverCert, key: tls.serverKey });
  const operatorKubeconfig = devkube.kubeconfig.replace(devkube.url, proxy.url).replace(devkube.token, token);
  kubeConfig = parseKubeConfig(operatorKubeconfig);
  if (!operatorKubeconfig.includes(token)) throw new Error("the operator's kubeconfig does not carry the ServiceAccount token");

  // Exactly what the rendered Deployment gives its container (args, env, the ConfigMap through envFrom, the
  // downward API), through the real parser; only the service URL, the poll interval and the metrics port differ.
  const { args, env } = containerOptions(rendered, mode.namespace, "mds-operator-0");
  const config = parseOperatorConfig([...args.filter((a) => !a.startsWith("--metrics-address")), "--metrics-address=off"], {
    ...env,
    MDS_API_URL: service.url,
    MDS_POLL_FAST: "200ms",
    MDS_LOG_LEVEL: "debug",
  });
  if (config === "help") throw new Error("unexpected help");
  if (JSON.stringify(config.namespaces) !== JSON.stringify(mode.watch === undefined ? undefined : [mode.watch])) {
    throw new Error(`the Deployment makes the operator watch ${JSON.stringify(config.namespaces ?? "all")}, expected ${mode.watch ?? "all"}`);
  }
  const sink = new Writable({ write: (chunk: Buffer, _e, cb) => (logs.push(chunk.toString()), cb()) });
  runtime = await startOperatorRuntime(config, {
    kubeConfig,
    logger: pino({ level: "debug" }, sink),
    createOperator: createOperatorWithKinds,
    identity: "mds-operator-0",
  });
  await eventually(() => {
    if (!runtime?.isLeader()) throw new Error("not leading yet");
  }, { stopWhen: refused, what: "leadership" });
}

async function teardown(): Promise<void> {
  try {
    await runtime?.stop();
    runtime = undefined;
    await kubeConfig?.close();
    kubeConfig = undefined;
    await proxy?.close();
  } finally {
    // The servers are stopped whatever failed before: they would outlive the run.
    await webhook?.stop();
    webhook = undefined;
    await Promise.all([devkube?.stop(), service?.stop()]);
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  }
}

describe.each(modes)("the operator under deploy/'s RBAC: $name", (mode) => {
  beforeAll(() => setup(mode), 180_000);
  afterAll(teardown);

  // A rotation with consumers: Restart, rolling a Deployment, a StatefulSet and a DaemonSet.
  async function consumersFlow(): Promise<void> {
    await apply(project(), {
      ...database("orders", "Delete"),
      spec: { projectRef: { name: "shop" }, deletionPolicy: "Delete", connectionSecret: { rotation: { gracePeriod: "1s", consumers: "Restart" } } },
    });
    const orders = await waitReady("orders");
    const template = (app: string) => ({ metadata: { labels: { app } }, spec: { containers: [{ name: "app", image: "example/app:1", envFrom: [{ secretRef: { name: orders.secretName } }] }] } });
    const selector = (app: string) => ({ matchLabels: { app } });
    await apply(
      { apiVersion: "apps/v1", kind: "Deployment", metadata: meta("web"), spec: { replicas: 1, selector: selector("web"), template: template("web") } },
      { apiVersion: "apps/v1", kind: "StatefulSet", metadata: meta("ledger"), spec: { replicas: 1, serviceName: "ledger", selector: selector("ledger"), template: template("ledger") } },
      { apiVersion: "apps/v1", kind: "DaemonSet", metadata: meta("agent"), spec: { selector: selector("agent"), template: template("agent") } },
    );
    for (const w of ["deployment/web", "statefulset/ledger", "daemonset/agent"]) await admin(["-n", ns, "rollout", "status", w, "--timeout=60s"]);
    await admin(["-n", ns, "annotate", "mdsdb", "orders", "mds.dev/rotate=1", "--overwrite"]);
    await eventually(
      async () => {
        const rotation = (await getJson(["-n", ns, "get", "mdsdb", "orders"])).status?.["rotation"] as { trigger?: string; retiring?: unknown } | undefined;
        if (rotation?.trigger !== "1" || rotation.retiring !== undefined) throw new Error(`rotation ${JSON.stringify(rotation)}`);
      },
      { stopWhen: refused, what: "rotated, consumers rolled, old login revoked", timeoutMs: 90_000 },
    );
    for (const w of ["deployment/web", "statefulset/ledger", "daemonset/agent"]) expect((await getJson(["-n", ns, "get", w]))["metadata"]).toMatchObject({ generation: 2 });
    expect(proxy.denied).toEqual([]);
    expect(logs.join("").toLowerCase()).not.toContain("forbidden");
  }

  // Every kind's life: creation, a deleted and an edited Secret, a restore, backups, a Connection, both deletion policies.
  async function fullFlow(): Promise<void> {
    await apply(project(), database("orders", "Delete"), database("archive", "Retain"));
    const orders = await waitReady("orders");
    await waitReady("archive");
    // A write that finds its object gone makes the loop read it live, to tell a deletion meanwhile from an error: the
    // proxy answers one status write of the Project with 404, and the loop must be allowed to look.
    proxy.goneOnce((a) => a.resource === "projects" && a.subresource === "status" && a.verb === "patch" && a.name === "shop");
    await admin(["-n", ns, "annotate", "mdsproject", "shop", "mds.dev/reconcile-requested-at=gone-meanwhile", "--overwrite"]);
    await eventually(
      async () => {
        if (!proxy.requests.some((r) => r.attrs.resource === "projects" && r.attrs.verb === "get" && r.attrs.name === "shop")) throw new Error("not read live yet");
      },
      { stopWhen: refused, what: "the Project read live after its status write found it gone" },
    );
    const teamSecret = ns !== mode.namespace;
    if (teamSecret) {
      // The platform's own namespace may use the operator's token (the default fallback), read through its Role.
      // kubectl reads the storage version, v1beta1: its enums are CamelCase.
      await apply({ apiVersion: "mds.dev/v1alpha1", kind: "Project", metadata: { name: "platform", namespace: mode.namespace }, spec: { region: "us-east-1" } });
      await eventually(
        async () => {
          const st = (await getJson(["-n", mode.namespace, "get", "mdsproject", "platform"])).status as { credentials?: { source: string }; conditions?: { type: string; status: string }[] } | undefined;
          if (st?.conditions?.find((c) => c.type === "Ready")?.status !== "True" || st.credentials?.source !== "Operator") throw new Error(`platform: ${JSON.stringify(st)}`);
        },
        { stopWhen: refused, what: "platform Project Ready with the operator's token" },
      );
      await admin(["-n", mode.namespace, "delete", "mdsproject", "platform", "--wait=true", "--timeout=60s"]);
    }
    const credentialsFinalizers = async () => ((await getJson(["-n", ns, "get", "secret", "mds-credentials"]))["metadata"] as { finalizers?: string[] }).finalizers ?? [];
    expect(await credentialsFinalizers()).toEqual(teamSecret ? ["mds.dev/credentials-in-use"] : []);

    // A deleted Secret is re-created; an edited one is replaced.
    await admin(["-n", ns, "delete", "secret", orders.secretName]);
    await eventually(() => getJson(["-n", ns, "get", "secret", orders.secretName]), { stopWhen: refused, what: "Secret re-created" });
    await admin(["-n", ns, "patch", "secret", orders.secretName, "--type=merge", "-p", JSON.stringify({ stringData: { PGPASSWORD: "edited" } })]);
    await eventually(
      async () => {
        const data = (await getJson(["-n", ns, "get", "secret", orders.secretName])).data ?? {};
        if (Buffer.from(data["PGPASSWORD"] ?? "", "base64").toString() === "edited") throw new Error("not rebuilt yet");
      },
      { stopWhen: refused, what: "edited Secret rebuilt" },
    );

    // A restore of the latest backup into the same database.
    await api("POST", `/v1/databases/${orders.id}/backups`);
    await eventually(
      async () => {
        const list = (await api("GET", `/v1/databases/${orders.id}/backups`)).data as { status: string }[];
        if (list[0]?.status !== "completed") throw new Error("backup not completed");
      },
      { stopWhen: refused, what: "backup completed" },
    );
    await apply({
      apiVersion: "mds.dev/v1alpha1",
      kind: "DatabaseRestore",
      metadata: meta("rollback"),
      spec: { target: { databaseRef: { name: "orders" } }, source: { databaseRef: { name: "orders" }, latest: true } },
    });
    await eventually(
      async () => {
        const phase = (await getJson(["-n", ns, "get", "mdsrestore", "rollback"])).status?.["phase"];
        if (phase !== "Succeeded") throw new Error(`phase ${String(phase)}`);
      },
      { stopWhen: refused, what: "restore Succeeded", timeoutMs: 60_000 },
    );

    // A backup taken by a DatabaseBackup (read live by name, its status patched).
    await apply({ apiVersion: "mds.dev/v1alpha1", kind: "DatabaseBackup", metadata: meta("nightly"), spec: { databaseRef: { name: "orders" } } });
    await eventually(
      async () => {
        const phase = (await getJson(["-n", ns, "get", "mdsbackup", "nightly"])).status?.["phase"];
        if (phase !== "Succeeded") throw new Error(`phase ${String(phase)}`);
      },
      { stopWhen: refused, what: "backup Succeeded", timeoutMs: 60_000 },
    );

    // A BackupSchedule (read live, its status patched) creates a DatabaseBackup at its slot and, past keep: 1, deletes
    // the older one it owns (created here by hand exactly as the schedule creates a slot's: its ownerReference, the
    // slot's name and idempotencyKey; its own loop takes and seals the backup, so retention may delete it).
    await apply({ apiVersion: "mds.dev/v1alpha1", kind: "BackupSchedule", metadata: meta("every-minute"), spec: { databaseRef: { name: "orders" }, schedule: "* * * * *", keep: 1 } });
    const scheduleUid = ((await getJson(["-n", ns, "get", "backupschedule", "every-minute"]))["metadata"] as { uid: string }).uid;
    const earlierMinutes = Date.parse("2026-01-01T00:00:00Z") / 60_000;
    const earlierSlot = `every-minute-${earlierMinutes}`;
    await apply({
      apiVersion: "mds.dev/v1alpha1",
      kind: "DatabaseBackup",
      metadata: {
        ...meta(earlierSlot),
        annotations: { "mds.dev/scheduled-at": "2026-01-01T00:00:00Z" },
        ownerReferences: [{ apiVersion: "mds.dev/v1alpha1", kind: "BackupSchedule", name: "every-minute", uid: scheduleUid, controller: true }],
      },
      spec: { databaseRef: { name: "orders" }, idempotencyKey: `${scheduleUid}/${earlierMinutes}` },
    });
    await eventually(
      async () => {
        const items = ((await getJson(["-n", ns, "get", "mdsbackup"]))["items"] as { metadata: { name: string }; status?: { phase?: string } }[]) ?? [];
        const slots = items.filter((b) => b.metadata.name.startsWith("every-minute-"));
        if (slots.length !== 1 || slots[0]!.metadata.name === earlierSlot || slots[0]!.status?.phase !== "Succeeded") throw new Error(`slots ${JSON.stringify(slots.map((b) => [b.metadata.name, b.status?.phase]))}`);
      },
      { stopWhen: refused, what: "a slot taken and the earlier backup pruned", timeoutMs: 150_000 },
    );

    // A Connection: its own login and Secret, revoked and removed when it is deleted.
    await apply({ apiVersion: "mds.dev/v1alpha1", kind: "Connection", metadata: meta("reporting"), spec: { databaseRef: { name: "orders" }, connectionSecret: { name: "reporting-db" } } });
    await eventually(
      async () => {
        const ready = ((await getJson(["-n", ns, "get", "mdsconn", "reporting"])).status?.["conditions"] as { type: string; status: string }[] | undefined)?.find((c) => c.type === "Ready");
        if (ready?.status !== "True") throw new Error(`not Ready: ${JSON.stringify(ready)}`);
      },
      { stopWhen: refused, what: "Connection Ready", timeoutMs: 60_000 },
    );
    await admin(["-n", ns, "delete", "mdsconn", "reporting", "--wait=false"]);
    await eventually(
      async () => {
        if (await exists(["-n", ns, "mdsconn", "reporting"])) throw new Error("Connection still there");
      },
      { stopWhen: refused, what: "Connection deleted", timeoutMs: 60_000 },
    );

    // Delete removes the remote database and the Secret; Retain keeps the Secret, released from its owner.
    await admin(["-n", ns, "delete", "mdsrestore", "rollback", "--wait=false"]);
    await admin(["-n", ns, "delete", "mdsbackup", "nightly", "--wait=false"]);
    await admin(["-n", ns, "delete", "mdsdb", "orders", "archive", "--wait=false"]);
    await eventually(
      async () => {
        if (await exists(["-n", ns, "mdsdb", "orders"])) throw new Error("orders still there");
        if (await exists(["-n", ns, "mdsdb", "archive"])) throw new Error("archive still there");
      },
      { stopWhen: refused, what: "Databases deleted", timeoutMs: 60_000 },
    );
    const kept = await getJson(["-n", ns, "get", "secret", "archive"]);
    expect((kept["metadata"] as { ownerReferences?: unknown[] }).ownerReferences ?? []).toEqual([]);
    await eventually(
      async () => {
        if (await exists(["-n", ns, "secret", orders.secretName])) throw new Error("orders Secret still there");
      },
      { stopWhen: refused, what: "orders Secret deleted" },
    );
    await admin(["-n", ns, "delete", "mdsproject", "shop", "--wait=false"]);
    await eventually(
      async () => {
        if (await exists(["-n", ns, "mdsproject", "shop"])) throw new Error("project still there");
      },
      { stopWhen: refused, what: "Project deleted", timeoutMs: 60_000 },
    );

    // The last resource gone, the team's credentials Secret is released.
    await eventually(
      async () => {
        if ((await credentialsFinalizers()).length > 0) throw new Error("credentials Secret still guarded");
      },
      { stopWhen: refused, what: "credentials Secret released" },
    );

    expect(proxy.denied).toEqual([]);
    expect(logs.join("").toLowerCase()).not.toContain("forbidden");
  }

  it(
    mode.flow === "full" ? "creates, repairs, restores and deletes with no request forbidden" : "rotates rolling every workload kind with no request forbidden",
    () => (mode.flow === "full" ? fullFlow() : consumersFlow()),
    240_000,
  );

  it("was judged by devkube exactly as the manifests' RBAC reads", () => {
    expect(proxy.requests.length).toBeGreaterThan(20);
    const disagreements = proxy.requests.filter((r) => (r.status === 403) !== (authorize(grants, r.attrs) === undefined));
    expect(disagreements).toEqual([]);
  });

  it("used every verb on every resource that deploy/ grants (nothing granted is unused)", async () => {
    const unusedGrants = () => {
      const used = proxy.requests.filter((r) => r.status !== 403).map((r) => r.attrs);
      const unused: string[] = [];
      // The consumers flow exercises what its component adds; the full flow everything else.
      const judged = mode.flow === "consumers" ? grants.filter((g) => g.from.endsWith("/mds-operator-rotation-consumers")) : grants;
      for (const grant of judged) {
        for (const group of grant.rule.apiGroups ?? []) {
          for (const resource of grant.rule.resources ?? []) {
            const [plural = "", subresource] = resource.split("/");
            for (const verb of grant.rule.verbs) {
              const probe = (a: RequestAttributes) =>
                a.group === group && a.resource === plural && a.subresource === subresource && a.verb === verb && authorize([grant], a) !== undefined;
              if (!used.some(probe)) unused.push(`${grant.from}: ${verb} ${group ? `${group}/` : ""}${resource}${grant.namespace ? ` in ${grant.namespace}` : ""}`);
            }
          }
        }
      }
      return unused;
    };
    // Periodic calls (the Lease renewal every 2 s) may still be due: give them a moment.
    await eventually(
      () => {
        if (unusedGrants().length > 0) throw new Error("unused grants");
      },
      { what: "every grant used", timeoutMs: 10_000 },
    ).catch(() => undefined);
    expect(unusedGrants()).toEqual([]);
  });
});
