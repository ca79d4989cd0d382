import { createAcceptedIds, type AcceptedIds } from "../../src/operator/accepted.ts";
import type { KubeObject } from "../../src/kube/types.ts";
import { DatabaseType } from "../../src/resources/types.ts";
import type { FakeKube } from "./fake-kube.ts";

/**
 * For unit tests of kinds that refer to a Database put straight into the fake cluster: the operator's record of
 * accepted ids (src/operator/accepted.ts), and `accept(namespace, name)`, which records that Database's status.id as
 * its own loop does once it created or adopted it.
 */
export function acceptedFor(kube: FakeKube): { accepted: AcceptedIds; accept(namespace: string, name: string): void } {
  const accepted = createAcceptedIds();
  return {
    accepted,
    accept(namespace, name) {
      const db = kube.read<KubeObject>(DatabaseType, namespace, name);
      const id = (db?.["status"] as { id?: string } | undefined)?.id;
      if (db === undefined || id === undefined) throw new Error(`Database ${namespace}/${name} has no status.id`);
      accepted.accept(DatabaseType.kind, db, id);
    },
  };
}
