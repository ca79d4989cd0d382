import type { KubeObject } from "../../kube/types.ts";
import { ReconcileError } from "../../operator/errors.ts";
import { boundIdOf, logicalIdOf, remoteIdOf } from "../../operator/identity.ts";
import { resolveCredentials, type Controller, type ObjectCache } from "../../operator/controller.ts";
import type { MdsControllerContext } from "./remote-api.ts";

// Adoption is exclusive (docs/design.md#adoption): one remote object, one managing resource (per operator, as its informer caches see it).
// Of the resources of a kind that claim the same remote id, one manages it; the others are refused before they
// write, mint or delete anything (the managed loop: AdoptionConflict, and deletionPolicy Delete deletes nothing).
//
// Who manages, decided the same way by every reconcile of every claimant, whatever order they run in or crash in:
//   0. the resource that created the object: it carries that resource's logicalId at the service, which no status
//      names and no namespace writes;
//   1. a resource that recorded the id (it adopted it first): its status.id equals its spec.externalId, or its own
//      loop accepted the id in this process (the operator's memory, ../operator/accepted.ts);
//   2. then the oldest metadata.creationTimestamp;
//   3. then namespace/name, alphabetically.
// A claim is spec.externalId, or an id that status.id or the annotation alone names only where rule 0 or this
// process's acceptance proves it: a status.id written by hand into a resource that neither created nor adopts the
// object claims nothing, so it can neither take the object over nor hold its manager back.
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

/** The remote id this resource names (spec.externalId, status.id, the annotation), if it may claim at all. */
function claimOf(obj: KubeObject): string | undefined {
  if ((obj["spec"] as { managementPolicy?: string } | undefined)?.managementPolicy === "ObserveOnly") return undefined;
  return remoteIdOf(obj);
}

const adopts = (o: KubeObject, id: string) => (o["spec"] as { externalId?: string } | undefined)?.externalId === id;
/** An adoption recorded in status (forgeable only among resources that adopt the id by spec anyway). */
const recordedIn = (o: KubeObject, id: string) =>
  adopts(o, id) && (o["status"] as { id?: string } | undefined)?.id === id;
const stalled = (o: KubeObject) =>
  (o["status"] as { conditions?: { type: string; status: string }[] } | undefined)?.conditions?.some(
    (c) => c.type === "Stalled" && c.status === "True",
  ) === true;

/**
 * Whether `claimant`'s own credentials, resolved from its spec and namespace (never its status), see remote object
 * `id`: answered from what that token's mirror holds, with no call, so a claimant's slow or refused token never
 * delays another's reconcile. A claimant that cannot see the object could not act on it, so holds nobody back.
 * "created": seen, and the object carries the claimant's own logicalId (rule 0).
 */
export type SeenByClaimant = (claimant: KubeObject, id: string) => Promise<boolean | "created">;

/** SeenByClaimant through the operator's credential pool: the claimant's token as its own reconcile would pick it. */
export function seenWithOwnCredentials(
  ctx: Pick<MdsControllerContext, "pool" | "defaultCredentials" | "instanceId">,
  kind: "database" | "project",
): SeenByClaimant {
  return async (claimant, id) => {
    const spec = (claimant["spec"] ?? {}) as {
      credentials?: { secretRef: { name: string; key?: string | undefined } } | undefined;
    };
    try {
      const ns = claimant.metadata.namespace ?? "default";
      const own = await resolveCredentials(ctx, ns, spec);
      const found = kind === "database" ? own.mirror.peekDatabase(id) : own.mirror.peekProject(id);
      if (found === undefined) return false;
      return found.logicalId === logicalIdOf(ctx.instanceId, ns, claimant.metadata.name) ? "created" : true;
    } catch (err) {
      // No token for it: it acts on nothing. Anything else (the apiserver) is retried rather than guessed.
      if (err instanceof ReconcileError && err.reason === "CredentialsMissing") return false;
      throw err;
    }
  };
}

/** The objects of the cache that may claim `id`: the operator's index, or a scan where there is none. */
const candidatesOf = (objects: ObjectCache, id: string) => objects.withRemoteId?.(id) ?? objects.list();

/** A claimant as ranked: whether it created the object (rule 0) and whether it recorded the id (rule 1). */
interface Claim {
  obj: KubeObject;
  created: boolean;
  recorded: boolean;
}

/** Negative when `a` comes before `b` (the rules above). */
function compareClaims(a: Claim, b: Claim): number {
  const rank = (c: Claim) => (c.created ? 0 : c.recorded ? 1 : 2);
  const created = (o: KubeObject) => Date.parse(o.metadata.creationTimestamp ?? "") || Number.MAX_SAFE_INTEGER;
  const name = key(a.obj) < key(b.obj) ? -1 : key(a.obj) > key(b.obj) ? 1 : 0;
  return rank(a) - rank(b) || created(a.obj) - created(b.obj) || name;
}

/**
 * The resource of the same kind that manages `obj`'s remote object instead of it ("namespace/name"), or undefined
 * when `obj` may act on it (it claims nothing, or it comes first). `objects` is the kind's informer cache; `obj`
 * itself is taken as given (it may be fresher than the cache). `acceptedIdOf`: the id a resource's own loop accepted
 * in this process (../operator/accepted.ts).
 */
export async function managerOtherThan(
  objects: ObjectCache,
  obj: KubeObject,
  seen: SeenByClaimant,
  acceptedIdOf: (o: KubeObject) => string | undefined = () => undefined,
): Promise<string | undefined> {
  const id = claimOf(obj);
  if (id === undefined) return undefined;
  /** The claim of `o`, or undefined when it claims nothing: unseen, or an id it neither created nor adopts. */
  const claimBy = async (o: KubeObject): Promise<Claim | undefined> => {
    const visible = await seen(o, id);
    if (visible === false) return undefined;
    const created = visible === "created";
    const accepted = acceptedIdOf(o) === id;
    if (!created && !accepted && !adopts(o, id)) return undefined;
    return { obj: o, created, recorded: accepted || recordedIn(o, id) };
  };
  // The object itself: its own loop proved an id it does not adopt before asking (a Database's observe, by its
  // logicalId or this process's acceptance; its deletion deletes only such an id), so it ranks as the creator.
  const own = await claimBy(obj);
  const self = { obj, created: own?.created === true || !adopts(obj, id), recorded: own?.recorded === true };
  let first = self;
  for (const other of candidatesOf(objects, id)) {
    if (claimOf(other) !== id || key(other) === key(obj)) continue;
    const claim = await claimBy(other);
    if (claim === undefined || (!claim.created && !claim.recorded && stalled(other))) continue;
    if (compareClaims(claim, first) < 0) first = claim;
  }
  return first === self ? undefined : key(first.obj);
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
  /** Whether a Database resource has deletionProtection (the Database kind's typed reader says). */
  isProtected: (db: KubeObject) => boolean,
): Promise<string | undefined> {
  const protecting = candidatesOf(databases, databaseId)
    .filter((db) => db.metadata.deletionTimestamp === undefined && boundIdOf(db) === databaseId && isProtected(db))
    .sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
  for (const db of protecting) if ((await seen(db, databaseId)) !== false) return key(db);
  return undefined;
}
