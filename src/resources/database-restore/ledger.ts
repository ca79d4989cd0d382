import type { KubeClient } from "../../kube/client.ts";
import { isKubeConflict } from "../../kube/errors.ts";
import { SecretType, type KubeObject, type Secret } from "../../kube/types.ts";
import { annotations, labels, restoreKeysOf } from "../../operator/connection-secret.ts";
import { remoteIdOf } from "../../operator/identity.ts";
import { retryInProcess } from "../../operator/outcome.ts";
import { restoreLedgerLimit, type Database, type RestoreLedgerEntry } from "../database/schema.ts";
import { DatabaseType } from "../database/schema.ts";

// The restore ledger: the idempotency keys applied to a database, kept in two places so a re-applied restore finds
// its key whatever was deleted since: the target Database's status (bounded, visible) and its connection Secret's
// annotation (the Secret outlives the Database under deletionPolicy Retain). The restore writes both itself, before
// its POST: the entry must exist before the restore can have acted, which a later mirror by the Database's own loop
// could not promise. Each write is a merge patch of the ledger alone, with the resourceVersion it was computed from.

export interface LedgerDeps {
  kube: KubeClient;
  databases: { get(namespace: string | undefined, name: string): KubeObject | undefined };
  secrets: { get(namespace: string | undefined, name: string): Secret | undefined; list(namespace?: string): Secret[] };
}

/** The target's connection Secret: by the name its Database publishes, else any of ours holding its id. */
function targetSecret(
  deps: LedgerDeps,
  ns: string,
  targetDb: KubeObject | undefined,
  targetId: string,
): Secret | undefined {
  const status = targetDb?.["status"] as { secretName?: string } | undefined;
  const spec = targetDb?.["spec"] as { connectionSecret?: { name?: string } } | undefined;
  const name = status?.secretName ?? spec?.connectionSecret?.name ?? targetDb?.metadata.name;
  const byName = name === undefined ? undefined : deps.secrets.get(ns, name);
  if (byName?.metadata.labels?.[labels.databaseId] === targetId) return byName;
  return deps.secrets.list(ns).find((s) => s.metadata.labels?.[labels.databaseId] === targetId);
}

export function ledgerHas(
  deps: LedgerDeps,
  ns: string,
  targetName: string | undefined,
  targetId: string,
  key: string,
): boolean {
  const targetDb = targetName === undefined ? undefined : deps.databases.get(ns, targetName);
  const status = targetDb?.["status"] as { restoreLedger?: RestoreLedgerEntry[] } | undefined;
  if (remoteIdOf(targetDb) === targetId && (status?.restoreLedger ?? []).some((e) => e.key === key)) return true;
  return restoreKeysOf(targetSecret(deps, ns, targetDb, targetId)).includes(key);
}

/** Records the entry on the Database's status and the key on its Secret; a conflict is retried in process. */
export async function recordLedger(
  deps: LedgerDeps,
  ns: string,
  targetName: string | undefined,
  targetId: string,
  entry: RestoreLedgerEntry,
): Promise<void> {
  await retryInProcess(
    async () => {
      if (targetName !== undefined) {
        const db = await deps.kube.get<KubeObject>(DatabaseType, ns, targetName);
        if (db !== undefined && remoteIdOf(db) === targetId) {
          const status = (db["status"] ?? {}) as Database["status"] & object;
          const ledger = (status.restoreLedger ?? []).filter((e) => e.key !== entry.key);
          ledger.push(entry);
          await deps.kube.patchStatus(DatabaseType, ns, targetName, {
            metadata: { resourceVersion: db.metadata.resourceVersion },
            status: { restoreLedger: ledger.slice(-restoreLedgerLimit) },
          });
        }
      }
      const secret = targetSecret(
        deps,
        ns,
        targetName === undefined ? undefined : deps.databases.get(ns, targetName),
        targetId,
      );
      if (secret === undefined) return;
      const live = await deps.kube.get<Secret>(SecretType, ns, secret.metadata.name);
      const keys = restoreKeysOf(live);
      if (live === undefined || keys.includes(entry.key)) return;
      await deps.kube.patch(SecretType, ns, secret.metadata.name, {
        metadata: {
          resourceVersion: live.metadata.resourceVersion,
          annotations: { [annotations.restores]: JSON.stringify([...keys, entry.key].slice(-100)) },
        },
      });
    },
    { retryable: isKubeConflict },
  );
}
