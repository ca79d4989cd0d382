import type { KubeClient } from "../../kube/client.ts";
import { isKubeConflict } from "../../kube/errors.ts";
import type { KubeObject, Secret } from "../../kube/types.ts";
import { databaseSecretOf, recordRestoreKey, restoreKeysOf } from "../../operator/secret/restore-ledger.ts";
import { remoteIdOf } from "../../operator/identity.ts";
import { retryInProcess } from "../../operator/outcome.ts";
import { restoreLedgerLimit, type Database, type RestoreLedgerEntry } from "../database/schema.ts";
import { DatabaseType } from "../database/schema.ts";

// The restore ledger: the idempotency keys applied to a database, kept in two places so a re-applied restore finds
// its key whatever was deleted since: the target Database's status (bounded, visible) and its connection Secret's
// annotation (the Secret outlives the Database under deletionPolicy Retain; the Secret component's restore-ledger.ts
// reads and writes that copy). The restore writes both itself, before its POST: the entry must exist before the
// restore can have acted, which a later mirror by the Database's own loop could not promise. Each write is a merge
// patch of the ledger alone, with the resourceVersion it was computed from.

interface LedgerDeps {
  kube: KubeClient;
  databases: { get(namespace: string | undefined, name: string): KubeObject | undefined };
  secrets: { get(namespace: string | undefined, name: string): Secret | undefined; list(namespace?: string): Secret[] };
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
  return restoreKeysOf(databaseSecretOf(deps.secrets, ns, targetDb, targetId)).includes(key);
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
      const secret = databaseSecretOf(
        deps.secrets,
        ns,
        targetName === undefined ? undefined : deps.databases.get(ns, targetName),
        targetId,
      );
      if (secret !== undefined) await recordRestoreKey(deps.kube, ns, secret.metadata.name, entry.key);
    },
    { retryable: isKubeConflict },
  );
}
