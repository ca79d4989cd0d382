import type { KubeObject } from "../kube/types.ts";

// Which remote id a resource's own loop accepted: the one rule every kind that refers to another resource's remote
// object goes through (a Connection's Database, a clone's source, a backup's, a restore's and a schedule's database).
//
// status.id is anyone's to write who may write the status subresource, and where two namespaces share a token (the
// operator's, through --credentials-fallback-namespaces, or one workspace token given to several namespaces) an id
// of the other namespace's database is visible to both: so an id counts only once the referenced resource's own loop
// has accepted it in this process (created it, found it by its logicalId, or adopted it by spec.externalId under its
// own token, without an adoption conflict). The record lives here, in the operator's memory, where no tenant writes.
//
// After a restart, or in a replica that has just become the leader, the record is empty: each resource's loop runs
// again on start (the informer lists every object) and accepts its id again from what it can prove without status
// (its logicalId at the service, or spec.externalId), never from status.id. Until then a referrer waits
// (a kind's reason: DatabaseNotAccepted, src/resources/remote/accepted-database.ts) and is woken when the acceptance is
// recorded (onChange).

interface Entry {
  uid: string | undefined;
  id: string;
}

export interface AcceptedIds {
  /** The loop of `obj` (of `kind`) accepted remote id `id` for it. */
  accept(kind: string, obj: KubeObject, id: string): void;
  /** The loop of `obj` refused its id, or it is being deleted or `gone`: nothing may act through it. */
  forget(kind: string, obj: KubeObject, options?: { gone?: boolean }): void;
  /**
   * The id other resources may act on through `obj`: the one its loop accepted, for this very object (uid), and only
   * while its status still records that id (a changed status.id waits for the loop to accept it again).
   */
  idOf(kind: string, obj: KubeObject | undefined): string | undefined;
  /**
   * Whether the loop of `obj` has decided on it in this process (accepted or refused an id, or seen it go). Before
   * that, after a restart or a leader handover, a referrer waits quietly: the decision wakes it.
   */
  decided(kind: string, obj: KubeObject): boolean;
  /** The loop of `obj` has run once in this process, whatever came of it: its referrers stop waiting quietly. */
  looked(kind: string, obj: KubeObject): void;
}

const keyOf = (kind: string, obj: KubeObject) => `${kind}|${obj.metadata.namespace ?? ""}/${obj.metadata.name}`;

/** `onChange(kind, namespace, name)`: an acceptance was recorded or withdrawn (the operator wakes the referrers). */
export function createAcceptedIds(onChange: (kind: string, namespace: string, name: string) => void = () => {}) {
  const entries = new Map<string, Entry>();
  /** The uid of each object whose loop has decided in this process (see decided). */
  const decided = new Map<string, string | undefined>();
  const changed = (kind: string, obj: KubeObject) => onChange(kind, obj.metadata.namespace ?? "", obj.metadata.name);
  const ids: AcceptedIds = {
    accept(kind, obj, id) {
      const key = keyOf(kind, obj);
      decided.set(key, obj.metadata.uid);
      const before = entries.get(key);
      if (before?.id === id && before.uid === obj.metadata.uid) return;
      entries.set(key, { uid: obj.metadata.uid, id });
      changed(kind, obj);
    },
    forget(kind, obj, options) {
      const key = keyOf(kind, obj);
      const undecided = decided.get(key) !== obj.metadata.uid || !decided.has(key);
      // A gone object needs no record: a referrer finds no object and says so.
      if (options?.gone === true) decided.delete(key);
      else decided.set(key, obj.metadata.uid);
      // A referrer that waited quietly for this decision is woken to report its wait.
      if (entries.delete(key) || undecided) changed(kind, obj);
    },
    looked(kind, obj) {
      const key = keyOf(kind, obj);
      if (decided.has(key) && decided.get(key) === obj.metadata.uid) return;
      decided.set(key, obj.metadata.uid);
      changed(kind, obj);
    },
    decided(kind, obj) {
      const key = keyOf(kind, obj);
      return decided.has(key) && decided.get(key) === obj.metadata.uid;
    },
    idOf(kind, obj) {
      if (obj === undefined) return undefined;
      const entry = entries.get(keyOf(kind, obj));
      if (entry === undefined || entry.uid !== obj.metadata.uid) return undefined;
      const recorded = (obj["status"] as { id?: unknown } | undefined)?.id;
      return recorded === entry.id ? entry.id : undefined;
    },
  };
  return ids;
}
