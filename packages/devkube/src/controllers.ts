import type { Logger } from "pino";
import { finalizersOf, type Api } from "./api.ts";
import { CRD_FINALIZER } from "./crd.ts";
import { serviceAccountUser } from "./rbac.ts";
import type { Registry } from "./registry.ts";
import type { Store } from "./store.ts";
import { clone, isObj, metaOf, type Obj } from "./types.ts";

// What kube-controller-manager and apiextensions' controllers do that clients can observe:
// namespace deletion, CRD instance cleanup, and owner-reference garbage collection.

const CRD_KEY = "apiextensions.k8s.io/customresourcedefinitions";
// kube-controller-manager's controllers call the API as these ServiceAccounts, so admission policies see them
const NAMESPACE_CONTROLLER = serviceAccountUser("kube-system", "namespace-controller", "");
const GARBAGE_COLLECTOR = serviceAccountUser("kube-system", "generic-garbage-collector", "");
const ROOT_CA = "kube-root-ca.crt";
const ROOT_CA_DESCRIPTION =
  "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

export class Controllers {
  private readonly api: Api;
  private readonly store: Store;
  private readonly registry: Registry;
  private readonly logger: Logger;
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private stopped = false;

  private readonly caCert: string | undefined;

  /** caCert undefined: no per-namespace defaults (default ServiceAccount, kube-root-ca.crt). */
  constructor(api: Api, store: Store, registry: Registry, logger: Logger, caCert: string | undefined) {
    this.api = api;
    this.store = store;
    this.registry = registry;
    this.logger = logger;
    this.caCert = caCert;
  }

  /** Runs only after events a controller can act on: deletions, owner references, deleting objects. */
  watchStore(): () => void {
    return this.store.subscribe((_sk, ev) => {
      const meta = metaOf(ev.object);
      if (
        ev.type === "DELETED" ||
        meta["ownerReferences"] !== undefined ||
        meta["deletionTimestamp"] !== undefined ||
        (_sk === "/namespaces" && ev.type === "ADDED")
      )
        this.schedule();
    });
  }

  schedule(): void {
    if (this.stopped || this.timer || this.running) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const started = performance.now();
      this.runUntilQuiet();
      this.delayMs = Math.max(5, Math.min(1_000, 10 * (performance.now() - started)));
    }, this.delayMs);
  }

  /**
   * A pass scans every object (as the real controllers, it is eventually consistent), so passes are spaced by ten
   * times the last one's duration: at 20,000 objects the controllers take about a tenth of the CPU instead of
   * starving the API (a Secret with an owner reference, written thousands of times a minute, schedules a pass).
   */
  private delayMs = 5;

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }

  /** A deletion was refused by an admission policy in the last pass: try again later, as the real controllers do. */
  private denied = false;

  private runUntilQuiet(): void {
    this.running = true;
    this.denied = false;
    try {
      for (let i = 0; i < 50; i++) {
        const before = this.store.currentRv();
        this.pass();
        if (this.store.currentRv() === before) break;
      }
    } catch (err) {
      this.logger.error({ err }, "devkube controllers failed");
    } finally {
      this.running = false;
      if (this.denied && !this.stopped) {
        const retry = setTimeout(() => this.schedule(), 1_000);
        retry.unref();
      }
    }
  }

  private pass(): void {
    this.namespaceDefaults();
    this.namespaces();
    this.crds();
    this.garbageCollect();
  }

  /**
   * What kube-controller-manager puts in every active namespace: the "default" ServiceAccount and
   * the "kube-root-ca.crt" ConfigMap (re-created when deleted).
   */
  private namespaceDefaults(): void {
    const sa = this.registry.lookup("", "v1", "serviceaccounts");
    const cm = this.registry.lookup("", "v1", "configmaps");
    const caCert = this.caCert;
    if (!sa || !cm || caCert === undefined) return;
    const opts = {
      dryRun: false,
      fieldManager: "kube-controller-manager",
      userAgent: "kube-controller-manager",
      fieldValidation: "Strict" as const,
    };
    for (const ns of this.store.list("/namespaces")) {
      const meta = metaOf(ns);
      if (meta["deletionTimestamp"]) continue;
      const name = String(meta["name"]);
      if (!this.store.get(sa.storageKey, name, "default"))
        this.api.create(sa, name, { metadata: { name: "default" } }, opts);
      if (!this.store.get(cm.storageKey, name, ROOT_CA)) {
        this.api.create(
          cm,
          name,
          {
            metadata: { name: ROOT_CA, annotations: { "kubernetes.io/description": ROOT_CA_DESCRIPTION } },
            data: { "ca.crt": caCert },
          },
          opts,
        );
      }
    }
  }

  private namespaces(): void {
    for (const ns of this.store.list("/namespaces")) {
      const meta = metaOf(ns);
      if (!meta["deletionTimestamp"]) continue;
      const name = String(meta["name"]);
      let remaining = 0;
      for (const sk of this.store.storageKeys()) {
        const rt = this.registry.forStorageKey(sk);
        const items = this.store.list(sk, name).filter((o) => metaOf(o)["namespace"] === name);
        if (items.length === 0) continue;
        remaining += items.length;
        if (!rt) continue;
        // an object a ValidatingAdmissionPolicy refuses to delete keeps the namespace Terminating, as on a cluster
        for (const o of items) {
          if (
            !metaOf(o)["deletionTimestamp"] &&
            !this.api.deleteInternal(rt, name, String(metaOf(o)["name"]), "Background", NAMESPACE_CONTROLLER)
          )
            this.denied = true;
        }
      }
      if (remaining > 0) continue;
      const next = clone(ns);
      next["spec"] = { ...(isObj(next["spec"]) ? next["spec"] : {}), finalizers: [] };
      if (finalizersOf(next).length > 0) {
        this.writeIfChanged("/namespaces", next);
        continue;
      }
      this.store.remove("/namespaces", "", name);
      this.logger.debug({ namespace: name }, "namespace deleted");
    }
  }

  private crds(): void {
    const crdType = this.registry.forStorageKey(CRD_KEY);
    if (!crdType) return;
    for (const crd of this.store.list(CRD_KEY)) {
      const meta = metaOf(crd);
      if (!meta["deletionTimestamp"] || !finalizersOf(crd).includes(CRD_FINALIZER)) continue;
      const spec = isObj(crd["spec"]) ? crd["spec"] : {};
      const names = isObj(spec["names"]) ? spec["names"] : {};
      const sk = `${String(spec["group"])}/${String(names["plural"])}`;
      const rt = this.registry.crdTypes(String(meta["name"]))[0];
      const items = this.store.list(sk);
      if (rt)
        for (const o of items)
          if (!metaOf(o)["deletionTimestamp"])
            this.api.deleteInternal(rt, String(metaOf(o)["namespace"] ?? ""), String(metaOf(o)["name"]));
      if (this.store.list(sk).length > 0) continue;
      const next = clone(crd);
      metaOf(next)["finalizers"] = finalizersOf(crd).filter((f) => f !== CRD_FINALIZER);
      this.api.writeInternal(crdType, next);
    }
  }

  private garbageCollect(): void {
    const all = [...this.store.scan()];
    const uids = new Map<string, Obj>();
    for (const { obj } of all) uids.set(String(metaOf(obj)["uid"]), obj);
    const dependentsOf = (uid: string) => all.filter(({ obj }) => refsOf(obj).some((r) => r["uid"] === uid));

    for (const { sk, obj } of all) {
      const rt = this.registry.forStorageKey(sk);
      if (!rt) continue;
      const meta = metaOf(obj);
      const name = String(meta["name"]);
      const ns = String(meta["namespace"] ?? "");
      const uid = String(meta["uid"]);
      const deleting = Boolean(meta["deletionTimestamp"]);
      const fins = finalizersOf(obj);

      if (deleting && fins.includes("orphan")) {
        for (const dep of dependentsOf(uid)) {
          const depRt = this.registry.forStorageKey(dep.sk);
          if (!depRt) continue;
          const next = clone(dep.obj);
          metaOf(next)["ownerReferences"] = refsOf(next).filter((r) => r["uid"] !== uid);
          if ((metaOf(next)["ownerReferences"] as Obj[]).length === 0) delete metaOf(next)["ownerReferences"];
          this.api.writeInternal(depRt, next);
        }
        const next = clone(obj);
        metaOf(next)["finalizers"] = fins.filter((f) => f !== "orphan");
        this.api.writeInternal(rt, next);
        continue;
      }
      if (deleting && fins.includes("foregroundDeletion")) {
        const deps = dependentsOf(uid);
        for (const dep of deps) {
          const depRt = this.registry.forStorageKey(dep.sk);
          if (depRt && !metaOf(dep.obj)["deletionTimestamp"])
            this.api.deleteInternal(
              depRt,
              String(metaOf(dep.obj)["namespace"] ?? ""),
              String(metaOf(dep.obj)["name"]),
              "Foreground",
              GARBAGE_COLLECTOR,
            );
        }
        const blocking = dependentsOf(uid).filter(
          ({ sk: s, obj: o }) =>
            this.store.get(s, String(metaOf(o)["namespace"] ?? ""), String(metaOf(o)["name"])) &&
            refsOf(o).some((r) => r["uid"] === uid && r["blockOwnerDeletion"] === true),
        );
        if (blocking.length === 0) {
          const cur = this.store.get(sk, ns, name);
          if (cur) {
            metaOf(cur)["finalizers"] = finalizersOf(cur).filter((f) => f !== "foregroundDeletion");
            this.api.writeInternal(rt, cur);
          }
        }
        continue;
      }
      const refs = refsOf(obj);
      if (refs.length === 0 || deleting) continue;
      const alive = refs.filter((r) => {
        const owner = uids.get(String(r["uid"]));
        if (!owner) return false;
        // a namespaced dependent can only be owned by an object in its namespace or a cluster-scoped one
        const ownerNs = String(metaOf(owner)["namespace"] ?? "");
        return ownerNs === "" || ownerNs === ns;
      });
      if (alive.length === 0) {
        const ownerDeletingForeground = refs.some((r) => {
          const owner = uids.get(String(r["uid"]));
          return owner && finalizersOf(owner).includes("foregroundDeletion");
        });
        if (
          !this.api.deleteInternal(
            rt,
            ns,
            name,
            ownerDeletingForeground ? "Foreground" : "Background",
            GARBAGE_COLLECTOR,
          )
        )
          this.denied = true;
      } else if (alive.length < refs.length) {
        const next = clone(obj);
        metaOf(next)["ownerReferences"] = alive;
        this.api.writeInternal(rt, next);
      }
    }
  }

  private writeIfChanged(sk: string, obj: Obj): void {
    const rt = this.registry.forStorageKey(sk);
    if (rt) this.api.writeInternal(rt, obj);
  }
}

function refsOf(o: Obj): Obj[] {
  const r = metaOf(o)["ownerReferences"];
  return Array.isArray(r) ? r.filter(isObj) : [];
}
