import type { KubeObject } from "../kube/types.ts";
import { ReconcileError } from "../operator/errors.ts";
import { boundIdOf, remoteIdOf } from "../operator/identity.ts";
import { resolveCredentials, type Controller, type ObjectCache } from "../operator/controller.ts";
import type { MdsControllerContext } from "./remote-api.ts";
import { readDatabase } from "./database/read.ts";

// Adoption is exclusive (docs/design.md#adoption): one remote object, one managing resource (per operator, as its informer caches see it).
// Of the resources of a kind that claim the same remote id, one manages it; the others are refused before they
// write, mint or delete anything (the managed loop: AdoptionConflict, and deletionPolicy Delete deletes nothing).
//
// Who manages, decided the same way by every reconcile of every claimant, whatever order they run in or crash in:
//   1. a resource whose status.id records the id (it was accepted: it created the object or adopted it first);
//   2. then the oldest metadata.creationTimestamp;
//   3. then namespace/name, alphabetically.
// A claimant that has not recorded the id and is Stalled holds nobody back: it acts on nothing, and it may be
// stalled because its token cannot even see the object (AdoptionRefused); otherwise any namespace could block
// another team's adoption by naming the id first.
// Nor does a claimant whose own credentials cannot see the object: spec.externalId, status.id and the annotation
// are all anyone's to write who may write that resource (status too, with RBAC on the status subresource), so a
// claim counts only when the credentials its spec resolves to (spec.credentials, else its namespace's Secret, else
// the operator's where allowed: credentials.ts) see the remote object. Otherwise team B, having learnt an id of
// team A's, could write it in the status of an older Database of its own and stall A's (or block A's Project's
// deletion: protectingDatabaseOf). Namespaces whose tokens see one workspace can act on its objects anyway: among
// them exclusivity guards against mistakes, and status is the operator's (docs/many-teams.md, RBAC).
// Rule 1 makes the choice stable: once a claimant has recorded the id, a later or restarted reconcile of another
// never takes it over; the informer cache's lag can at worst let two record it at the same moment, and then
// rules 2 and 3 still pick one, the same one everywhere.
// A claim is a Full resource's remote id (spec.externalId, status.id, or the id annotation written after a create);
// an ObserveOnly resource reads only, so it neither claims nor is refused. A resource being deleted still claims
// until it is gone: the remote object is handed over only once its deletion (Retain or Delete) is done.

function key(obj: KubeObject): string {
  return `${obj.metadata.namespace ?? ""}/${obj.metadata.name}`;
}

/** The remote id this resource claims to manage, if any. */
function claimOf(obj: KubeObject): string | undefined {
  if ((obj["spec"] as { managementPolicy?: string } | undefined)?.managementPolicy === "ObserveOnly") return undefined;
  return remoteIdOf(obj);
}

const recordedIn = (o: KubeObject, id: string) => (o["status"] as { id?: string } | undefined)?.id === id;
const stalled = (o: KubeObject) =>
  (o["status"] as { conditions?: { type: string; status: string }[] } | undefined)?.conditions?.some(
    (c) => c.type === "Stalled" && c.status === "True",
  ) === true;

/**
 * Whether `claimant`'s own credentials, resolved from its spec and namespace (never its status), see remote object
 * `id`: answered from what that token's mirror holds, with no call, so a claimant's slow or refused token never
 * delays another's reconcile. A claimant that cannot see the object could not act on it, so holds nobody back.
 */
export type SeenByClaimant = (claimant: KubeObject, id: string) => Promise<boolean>;

/** SeenByClaimant through the operator's credential pool: the claimant's token as its own reconcile would pick it. */
export function seenWithOwnCredentials(
  ctx: Pick<MdsControllerContext, "pool" | "defaultCredentials">,
  kind: "database" | "project",
): SeenByClaimant {
  return async (claimant, id) => {
    const spec = (claimant["spec"] ?? {}) as {
      credentials?: { secretRef: { name: string; key?: string | undefined } } | undefined;
    };
    try {
      const own = await resolveCredentials(ctx, claimant.metadata.namespace ?? "default", spec);
      return (kind === "database" ? own.mirror.peekDatabase(id) : own.mirror.peekProject(id)) !== undefined;
    } catch (err) {
      // No token for it: it acts on nothing. Anything else (the apiserver) is retried rather than guessed.
      if (err instanceof ReconcileError && err.reason === "CredentialsMissing") return false;
      throw err;
    }
  };
}

/** The objects of the cache that may claim `id`: the operator's index, or a scan where there is none. */
const candidatesOf = (objects: ObjectCache, id: string) => objects.withRemoteId?.(id) ?? objects.list();

/** Negative when `a` comes before `b` for remote id `id` (the rules above). */
function compareClaims(a: KubeObject, b: KubeObject, id: string): number {
  const recorded = (o: KubeObject) => (recordedIn(o, id) ? 0 : 1);
  const created = (o: KubeObject) => Date.parse(o.metadata.creationTimestamp ?? "") || Number.MAX_SAFE_INTEGER;
  const name = key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0;
  return recorded(a) - recorded(b) || created(a) - created(b) || name;
}

/**
 * The resource of the same kind that manages `obj`'s remote object instead of it ("namespace/name"), or undefined
 * when `obj` may act on it (it claims nothing, or it comes first). `objects` is the kind's informer cache; `obj`
 * itself is taken as given (it may be fresher than the cache).
 */
export async function managerOtherThan(
  objects: ObjectCache,
  obj: KubeObject,
  seen: SeenByClaimant,
): Promise<string | undefined> {
  const id = claimOf(obj);
  if (id === undefined) return undefined;
  let first: KubeObject = obj;
  for (const other of candidatesOf(objects, id)) {
    if (claimOf(other) !== id || key(other) === key(obj) || (!recordedIn(other, id) && stalled(other))) continue;
    // Only a claim that would come first is worth the credentials check.
    if (compareClaims(other, first, id) < 0 && (await seen(other, id))) first = other;
  }
  return first === obj ? undefined : key(first);
}

/** Wakes the other claimants of a changed resource's remote id: a refused one may now come first. */
export function wakeOtherClaimants(kind: string): NonNullable<Controller["wakeOn"]>[number] {
  return {
    kind,
    keys(changed, own) {
      const id = claimOf(changed) ?? remoteIdOf(changed);
      if (id === undefined) return [];
      return candidatesOf(own, id)
        .filter((o) => claimOf(o) === id && key(o) !== key(changed))
        .map(key);
    },
  };
}

/**
 * The Database resource ("namespace/name") with deletionProtection that manages remote database `databaseId`, if
 * any: a project's deletion would take that database with it (its default database), so it waits. A Database being
 * deleted protects nothing any more (and would otherwise wait for the project in turn), nor does one whose own
 * credentials cannot see the database: its status.id may be anyone's writing.
 */
export async function protectingDatabaseOf(
  databases: ObjectCache,
  databaseId: string,
  seen: SeenByClaimant,
): Promise<string | undefined> {
  const protecting = candidatesOf(databases, databaseId)
    .filter(
      (db) =>
        db.metadata.deletionTimestamp === undefined &&
        boundIdOf(db) === databaseId &&
        readDatabase(db)?.spec.deletionProtection === true,
    )
    .sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
  for (const db of protecting) if (await seen(db, databaseId)) return key(db);
  return undefined;
}
