import { deploymentStatus } from "./deployment-status.ts";
import { clone, isObj, jsonEqual, metaOf, type Obj } from "./types.ts";
import {
  controllerRef,
  isTerminating,
  nameOf,
  num,
  scaled,
  specOf,
  STORAGE,
  statusOf,
  templateHash,
  uidOf,
  type WorkloadContext,
} from "./workload-context.ts";

// The Deployment controller as kubectl and an operator observe it: a ReplicaSet per pod template named
// <deployment>-<pod-template-hash>, revisions in deployment.kubernetes.io/revision, RollingUpdate bounded by
// maxSurge/maxUnavailable or Recreate, paused, revisionHistoryLimit, and the status and conditions
// (Progressing/Available with upstream's reasons and messages, ProgressDeadlineExceeded: deployment-status.ts) that
// `kubectl rollout status` reads.

const MANAGER = "kube-controller-manager";
const HASH = "pod-template-hash";
const REVISION = "deployment.kubernetes.io/revision";
const DESIRED = "deployment.kubernetes.io/desired-replicas";
const MAX = "deployment.kubernetes.io/max-replicas";
// annotations of a Deployment not copied to its ReplicaSets (upstream skipCopyAnnotation)
const NOT_COPIED = new Set([
  "kubectl.kubernetes.io/last-applied-configuration",
  REVISION,
  "deployment.kubernetes.io/revision-history",
  DESIRED,
  MAX,
  "deprecated.deployment.rollback.to",
]);

const revisionOf = (rs: Obj): number => Number((metaOf(rs)["annotations"] as Obj | undefined)?.[REVISION] ?? 0) || 0;
const replicasOf = (rs: Obj): number => num(specOf(rs)["replicas"]);
const sum = (list: Obj[], f: (o: Obj) => number): number => list.reduce((n, o) => n + f(o), 0);

/** The pod template without the pod-template-hash label, to compare with the Deployment's (EqualIgnoreHash). */
function withoutHash(template: unknown): unknown {
  if (!isObj(template)) return template;
  const t = clone(template);
  const labels = isObj(t["metadata"]) ? (t["metadata"] as Obj)["labels"] : undefined;
  if (isObj(labels)) {
    delete labels[HASH];
    if (Object.keys(labels).length === 0) delete (t["metadata"] as Obj)["labels"];
  }
  return t;
}

export function syncDeployment(ctx: WorkloadContext, ns: string, name: string): void {
  const d = ctx.get(STORAGE.deployment, ns, name);
  if (!d || isTerminating(d)) return;
  new DeploymentSync(ctx, d).run();
}

class DeploymentSync {
  private readonly ctx: WorkloadContext;
  private readonly d: Obj;
  private readonly ns: string;
  private readonly spec: Obj;
  private readonly replicas: number;
  private created = false;

  constructor(ctx: WorkloadContext, d: Obj) {
    this.ctx = ctx;
    this.d = d;
    this.ns = String(metaOf(d)["namespace"]);
    this.spec = specOf(d);
    this.replicas = num(this.spec["replicas"], 1);
  }

  /** ReplicaSets this Deployment controls, fresh from the store. */
  private replicaSets(): Obj[] {
    return this.ctx
      .owned(STORAGE.replicaset, this.ns, uidOf(this.d))
      .filter((rs) => !isTerminating(rs))
      .map((rs) => clone(rs));
  }

  private newRs(all: Obj[]): Obj | undefined {
    const want = withoutHash(this.spec["template"]);
    // the oldest matching one, as upstream FindNewReplicaSet
    return [...all]
      .sort((a, b) => String(metaOf(a)["creationTimestamp"]).localeCompare(String(metaOf(b)["creationTimestamp"])))
      .find((rs) => jsonEqual(withoutHash(specOf(rs)["template"]), want));
  }

  run(): void {
    this.ctx.claim(STORAGE.replicaset, this.d, "Deployment");
    const paused = this.spec["paused"] === true;
    let all = this.replicaSets();
    let newRs = this.newRs(all);
    if (!paused) newRs = this.ensureNewRs(all, newRs);
    all = this.replicaSets();
    newRs = newRs && all.find((rs) => uidOf(rs) === uidOf(newRs as Obj));
    const old = all.filter((rs) => rs !== newRs);

    if (paused || this.isScalingEvent(all)) this.scale(newRs, old);
    else if (specOf(this.d)["strategy"] && (specOf(this.d)["strategy"] as Obj)["type"] === "Recreate")
      this.recreate(newRs as Obj, old);
    else this.rollingUpdate(newRs as Obj, old);

    all = this.replicaSets();
    newRs = newRs && all.find((rs) => uidOf(rs) === uidOf(newRs as Obj));
    this.cleanup(all.filter((rs) => rs !== newRs));
    this.writeStatus(all, newRs, paused);
  }

  private fenceposts(): { surge: number; unavailable: number } {
    const strategy = isObj(this.spec["strategy"]) ? this.spec["strategy"] : {};
    if (strategy["type"] === "Recreate") return { surge: 0, unavailable: this.replicas };
    const ru = isObj(strategy["rollingUpdate"]) ? strategy["rollingUpdate"] : {};
    const surge = scaled(ru["maxSurge"] ?? "25%", this.replicas, true);
    const unavailable = scaled(ru["maxUnavailable"] ?? "25%", this.replicas, false);
    return surge === 0 && unavailable === 0 ? { surge, unavailable: 1 } : { surge, unavailable };
  }

  /** The ReplicaSet of the current template, created when missing; its revision moved above every other's. */
  private ensureNewRs(all: Obj[], existing: Obj | undefined): Obj {
    const maxOld = Math.max(0, ...all.filter((rs) => rs !== existing).map(revisionOf));
    const revision = String(maxOld + 1);
    if (existing) {
      if (revisionOf(existing) <= maxOld) {
        const rs = this.ctx.get(STORAGE.replicaset, this.ns, nameOf(existing)) as Obj;
        metaOf(rs)["annotations"] = { ...(metaOf(rs)["annotations"] as Obj | undefined), [REVISION]: revision };
        this.ctx.update(STORAGE.replicaset, rs, MANAGER);
      }
      this.setDeploymentRevision(revisionOf(existing) <= maxOld ? revision : String(revisionOf(existing)));
      return existing;
    }
    let collisions = num(statusOf(this.d)["collisionCount"]);
    for (;;) {
      const hash = templateHash(this.spec["template"], collisions);
      const rsName = `${nameOf(this.d)}-${hash}`;
      const clash = this.ctx.store.get(STORAGE.replicaset, this.ns, rsName);
      if (clash) {
        // a ReplicaSet of that name with another template (or another owner): the next hash, as upstream
        collisions++;
        continue;
      }
      const template = clone(isObj(this.spec["template"]) ? this.spec["template"] : {});
      const tmeta = isObj(template["metadata"]) ? template["metadata"] : {};
      template["metadata"] = tmeta;
      tmeta["labels"] = { ...(isObj(tmeta["labels"]) ? tmeta["labels"] : {}), [HASH]: hash };
      const selector = clone(isObj(this.spec["selector"]) ? this.spec["selector"] : {});
      selector["matchLabels"] = { ...(isObj(selector["matchLabels"]) ? selector["matchLabels"] : {}), [HASH]: hash };
      const annotations: Obj = {};
      for (const [k, v] of Object.entries((metaOf(this.d)["annotations"] as Obj | undefined) ?? {}))
        if (!NOT_COPIED.has(k)) annotations[k] = v;
      const { surge } = this.fenceposts();
      Object.assign(annotations, {
        [REVISION]: revision,
        [DESIRED]: String(this.replicas),
        [MAX]: String(this.replicas + surge),
      });
      const created = this.ctx.create(
        STORAGE.replicaset,
        this.ns,
        {
          metadata: {
            name: rsName,
            labels: tmeta["labels"],
            annotations,
            ownerReferences: [controllerRef(this.d, "apps/v1", "Deployment")],
          },
          spec: {
            replicas: 0,
            minReadySeconds: num(this.spec["minReadySeconds"]),
            selector,
            template,
          },
        },
        MANAGER,
      );
      this.created = true;
      if (collisions !== num(statusOf(this.d)["collisionCount"])) statusOf(this.d)["collisionCount"] = collisions;
      this.setDeploymentRevision(revision);
      return created;
    }
  }

  private setDeploymentRevision(revision: string): void {
    const annotations = (metaOf(this.d)["annotations"] as Obj | undefined) ?? {};
    if (annotations[REVISION] === revision) return;
    const cur = this.ctx.get(STORAGE.deployment, this.ns, nameOf(this.d)) as Obj;
    metaOf(cur)["annotations"] = { ...(metaOf(cur)["annotations"] as Obj | undefined), [REVISION]: revision };
    const written = this.ctx.update(STORAGE.deployment, cur, MANAGER);
    metaOf(this.d)["annotations"] = metaOf(written)["annotations"];
    metaOf(this.d)["resourceVersion"] = metaOf(written)["resourceVersion"];
  }

  private setReplicas(rs: Obj, replicas: number): void {
    const { surge } = this.fenceposts();
    const annotations = { ...(metaOf(rs)["annotations"] as Obj | undefined) };
    const wantAnn = { [DESIRED]: String(this.replicas), [MAX]: String(this.replicas + surge) };
    if (replicasOf(rs) === replicas && annotations[DESIRED] === wantAnn[DESIRED] && annotations[MAX] === wantAnn[MAX])
      return;
    const cur = this.ctx.get(STORAGE.replicaset, this.ns, nameOf(rs));
    if (!cur) return;
    specOf(cur)["replicas"] = replicas;
    cur["spec"] = specOf(cur);
    metaOf(cur)["annotations"] = { ...annotations, ...wantAnn };
    const written = this.ctx.update(STORAGE.replicaset, cur, MANAGER);
    const before = replicasOf(rs);
    if (before !== replicas)
      this.ctx.event(
        this.d,
        "ScalingReplicaSet",
        `Scaled ${replicas > before ? "up" : "down"} replica set ${nameOf(rs)} from ${before} to ${replicas}`,
        "deployment-controller",
      );
    specOf(rs)["replicas"] = replicas;
    metaOf(rs)["resourceVersion"] = metaOf(written)["resourceVersion"];
  }

  /** Upstream isScalingEvent: an active ReplicaSet was sized for another replica count. */
  private isScalingEvent(all: Obj[]): boolean {
    return all.some((rs) => {
      const desired = (metaOf(rs)["annotations"] as Obj | undefined)?.[DESIRED];
      return replicasOf(rs) > 0 && desired !== undefined && desired !== String(this.replicas);
    });
  }

  /** Scaling without rolling (paused, or replicas changed): one active ReplicaSet takes all; several, proportionally. */
  private scale(newRs: Obj | undefined, old: Obj[]): void {
    const active = [newRs, ...old].filter((rs): rs is Obj => rs !== undefined && replicasOf(rs) > 0);
    if (active.length <= 1) {
      const target = active[0] ?? newRs;
      if (target) this.setReplicas(target, this.replicas);
      for (const rs of old) if (rs !== target && replicasOf(rs) > 0) this.setReplicas(rs, 0);
      return;
    }
    const { surge } = this.fenceposts();
    const allowed = this.replicas + surge;
    const current = sum(active, replicasOf);
    let left = allowed - current;
    if (left === 0) return;
    // larger (then newer) ReplicaSets first, each its share rounded; the rest to the first
    const ordered = [...active].sort((a, b) => replicasOf(b) - replicasOf(a) || revisionOf(b) - revisionOf(a));
    const sizes = new Map(ordered.map((rs) => [rs, replicasOf(rs)]));
    for (const rs of ordered) {
      const share = Math.round((replicasOf(rs) * (allowed - current)) / current);
      const step = left > 0 ? Math.min(share, left) : Math.max(share, left);
      sizes.set(rs, Math.max(0, replicasOf(rs) + step));
      left -= step;
    }
    const first = ordered[0] as Obj;
    sizes.set(first, Math.max(0, (sizes.get(first) ?? 0) + left));
    for (const [rs, size] of sizes) this.setReplicas(rs, size);
  }

  private rollingUpdate(newRs: Obj, old: Obj[]): void {
    const { surge, unavailable } = this.fenceposts();
    // scale up the new ReplicaSet within maxSurge (upstream NewRSNewReplicas)
    const current = sum([newRs, ...old], replicasOf);
    const maxTotal = this.replicas + surge;
    if (replicasOf(newRs) > this.replicas) this.setReplicas(newRs, this.replicas);
    else if (current < maxTotal) {
      const up = Math.min(maxTotal - current, this.replicas - replicasOf(newRs));
      this.setReplicas(newRs, replicasOf(newRs) + up);
    } else this.setReplicas(newRs, replicasOf(newRs));
    // scale down old ones, keeping at least replicas - maxUnavailable available (upstream reconcileOldReplicaSets)
    const fresh = this.replicaSets();
    const freshNew = fresh.find((rs) => uidOf(rs) === uidOf(newRs)) as Obj;
    let olds = fresh.filter((rs) => rs !== freshNew && replicasOf(rs) > 0);
    if (olds.length === 0) return;
    const available = (rs: Obj) => num(statusOf(rs)["availableReplicas"]);
    const allPods = sum(fresh, replicasOf);
    const minAvailable = this.replicas - unavailable;
    const newUnavailable = replicasOf(freshNew) - available(freshNew);
    let maxScaledDown = allPods - minAvailable - newUnavailable;
    if (maxScaledDown <= 0) return;
    // first the old replicas that are not available anyway
    olds = [...olds].sort((a, b) =>
      String(metaOf(a)["creationTimestamp"]).localeCompare(String(metaOf(b)["creationTimestamp"])),
    );
    for (const rs of olds) {
      if (maxScaledDown <= 0) break;
      const unhealthy = replicasOf(rs) - available(rs);
      if (unhealthy <= 0) continue;
      const down = Math.min(unhealthy, maxScaledDown);
      this.setReplicas(rs, replicasOf(rs) - down);
      maxScaledDown -= down;
    }
    // then available ones, oldest first, while enough stay available
    const availableNow = sum([freshNew, ...olds], available);
    let canDown = availableNow - minAvailable;
    for (const rs of olds) {
      if (canDown <= 0) break;
      if (replicasOf(rs) === 0) continue;
      const down = Math.min(replicasOf(rs), canDown);
      this.setReplicas(rs, replicasOf(rs) - down);
      canDown -= down;
    }
  }

  /** Recreate: old ReplicaSets to zero, and the new one only once none of their pods is left. */
  private recreate(newRs: Obj, old: Obj[]): void {
    for (const rs of old) if (replicasOf(rs) > 0) this.setReplicas(rs, 0);
    const oldPods = old.some((rs) => this.ctx.owned(STORAGE.pod, this.ns, uidOf(rs)).length > 0);
    if (!oldPods) this.setReplicas(newRs, this.replicas);
  }

  /** Old ReplicaSets beyond revisionHistoryLimit, oldest revision first, once scaled down and empty. */
  private cleanup(old: Obj[]): void {
    const limit = num(this.spec["revisionHistoryLimit"], 10);
    const idle = old
      .filter((rs) => replicasOf(rs) === 0 && num(statusOf(rs)["replicas"]) === 0)
      .sort((a, b) => revisionOf(a) - revisionOf(b));
    for (const rs of idle.slice(0, Math.max(0, old.length - limit)))
      this.ctx.delete(STORAGE.replicaset, this.ns, nameOf(rs));
  }

  private writeStatus(all: Obj[], newRs: Obj | undefined, paused: boolean): void {
    const before = statusOf(this.d);
    const { status, recheckInMs } = deploymentStatus({
      d: this.d,
      all,
      newRs,
      paused,
      created: this.created,
      maxUnavailable: this.fenceposts().unavailable,
      now: Date.now(),
    });
    if (recheckInMs !== undefined) this.ctx.requeue("deployment", this.ns, nameOf(this.d), recheckInMs);
    if (jsonEqual(status, before)) return;
    const cur = this.ctx.get(STORAGE.deployment, this.ns, nameOf(this.d));
    if (!cur) return;
    cur["status"] = status;
    this.ctx.update(STORAGE.deployment, cur, MANAGER, "status");
  }
}
