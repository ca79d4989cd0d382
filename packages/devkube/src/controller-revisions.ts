import { clone, isObj, jsonEqual, metaOf, type Obj } from "./types.ts";
import {
  CONTROLLER_REVISIONS,
  controllerRef,
  nameOf,
  num,
  specOf,
  templateHash,
  uidOf,
  type WorkloadContext,
} from "./workload-context.ts";

// ControllerRevisions, the history of a StatefulSet's or DaemonSet's pod template (what `kubectl rollout history`
// and `undo` read): one per distinct template, named <owner>-<hash>, revision numbers increasing, the oldest
// unused ones pruned beyond revisionHistoryLimit.

const MANAGER = "kube-controller-manager";

/** The pod template a revision recorded. */
export function templateOf(revision: Obj): Obj {
  const data = isObj(revision["data"]) ? revision["data"] : {};
  const template = clone(isObj(specOf(data)["template"]) ? (specOf(data)["template"] as Obj) : {});
  delete template["$patch"];
  return template;
}

export interface Revision {
  name: string;
  hash: string;
  revision: number;
}

/** The revision's data: the template as a patch that replaces it, as upstream stores it. */
function dataOf(owner: Obj): Obj {
  const template = clone(isObj(specOf(owner)["template"]) ? (specOf(owner)["template"] as Obj) : {});
  return { spec: { template: { ...template, $patch: "replace" } } };
}

export function revisionsOf(ctx: WorkloadContext, owner: Obj): Obj[] {
  return ctx.owned(CONTROLLER_REVISIONS, String(metaOf(owner)["namespace"]), uidOf(owner));
}

/** The revision of the owner's current template, created (or renumbered, for a template back to an old one). */
export function ensureRevision(ctx: WorkloadContext, owner: Obj, kind: string): Revision {
  const ns = String(metaOf(owner)["namespace"]);
  const data = dataOf(owner);
  const existing = revisionsOf(ctx, owner);
  const latest = Math.max(0, ...existing.map((r) => num(r["revision"])));
  const same = existing.find((r) => jsonEqual(r["data"], data));
  if (same) {
    const hash = String((metaOf(same)["labels"] as Obj | undefined)?.["controller.kubernetes.io/hash"] ?? "");
    if (num(same["revision"]) < latest) {
      const cur = ctx.get(CONTROLLER_REVISIONS, ns, nameOf(same)) as Obj;
      cur["revision"] = latest + 1;
      ctx.update(CONTROLLER_REVISIONS, cur, MANAGER);
      return { name: nameOf(same), hash, revision: latest + 1 };
    }
    return { name: nameOf(same), hash, revision: num(same["revision"]) };
  }
  let collisions = 0;
  for (;;) {
    const hash = templateHash(specOf(owner)["template"], collisions);
    const name = `${nameOf(owner)}-${hash}`;
    if (ctx.store.get(CONTROLLER_REVISIONS, ns, name)) {
      collisions++;
      continue;
    }
    const tmeta = isObj(data["spec"]) ? metaOf((data["spec"] as Obj)["template"] as Obj) : {};
    ctx.create(
      CONTROLLER_REVISIONS,
      ns,
      {
        metadata: {
          name,
          labels: { ...((tmeta["labels"] as Obj | undefined) ?? {}), "controller.kubernetes.io/hash": hash },
          ownerReferences: [controllerRef(owner, "apps/v1", kind)],
        },
        data,
        revision: latest + 1,
      },
      MANAGER,
    );
    return { name, hash, revision: latest + 1 };
  }
}

/** Deletes the oldest revisions beyond revisionHistoryLimit, among those no pod and no status names. */
export function pruneRevisions(ctx: WorkloadContext, owner: Obj, inUse: Set<string>): void {
  const limit = num(specOf(owner)["revisionHistoryLimit"], 10);
  const idle = revisionsOf(ctx, owner)
    .filter((r) => !inUse.has(nameOf(r)))
    .sort((a, b) => num(a["revision"]) - num(b["revision"]));
  for (const r of idle.slice(0, Math.max(0, idle.length - limit)))
    ctx.delete(CONTROLLER_REVISIONS, String(metaOf(owner)["namespace"]), nameOf(r));
}
