import { SecretType, type KubeObject, type Secret } from "../../kube/types.ts";
import type { KubeClient } from "../../kube/client.ts";
import { annotations, labels } from "./render.ts";
import { secretNameOf } from "./spec.ts";

// The restore ledger's copy on the Secret: the idempotency keys of the restores applied to its database, in the
// mds.dev/restores annotation. The Secret outlives its owner under deletionPolicy Retain, so a re-applied restore
// finds its key there after the Database is gone. The restore (src/resources/database-restore/ledger.ts) reads and
// writes it only through these functions; the publisher keeps the annotation whenever it rewrites the Secret.

/** At most this many keys, the newest last: older restores are far outside any replay window. */
const restoreKeysLimit = 100;

/**
 * The connection Secret of `databaseId`: the one its owner publishes (status.secretName, else the name its spec
 * gives), else any Secret of the operator's in the namespace holding that database's credentials.
 */
export function databaseSecretOf(
  secrets: { get(namespace: string | undefined, name: string): Secret | undefined; list(namespace?: string): Secret[] },
  namespace: string,
  owner: KubeObject | undefined,
  databaseId: string,
): Secret | undefined {
  const name =
    owner === undefined
      ? undefined
      : ((owner["status"] as { secretName?: string } | undefined)?.secretName ??
        secretNameOf({
          metadata: owner.metadata,
          spec: (owner["spec"] ?? {}) as { connectionSecret?: { name?: string | undefined } | undefined },
        }));
  const byName = name === undefined ? undefined : secrets.get(namespace, name);
  if (byName?.metadata.labels?.[labels.databaseId] === databaseId) return byName;
  return secrets.list(namespace).find((s) => s.metadata.labels?.[labels.databaseId] === databaseId);
}

/** The annotation's entries as written, whatever their shape (a newer version may record more than a key). */
function restoreEntriesOf(secret: Secret | undefined): unknown[] {
  const raw = secret?.metadata.annotations?.[annotations.restores];
  if (raw === undefined) return [];
  try {
    const parsed: unknown = JSON.parse(raw);
    return Array.isArray(parsed) ? parsed : [];
  } catch {
    return [];
  }
}

/** The restore keys recorded on a Secret (none if it or the annotation is missing or unreadable). */
export function restoreKeysOf(secret: Secret | undefined): string[] {
  return restoreEntriesOf(secret).filter((k): k is string => typeof k === "string");
}

/**
 * Adds `key` to the Secret's restore keys: a merge patch of that annotation alone, computed from the live Secret and
 * sent with its resourceVersion (a conflict throws: the caller retries). A Secret gone since is nothing to record on.
 */
export async function recordRestoreKey(kube: KubeClient, namespace: string, name: string, key: string): Promise<void> {
  const live = await kube.get<Secret>(SecretType, namespace, name);
  const entries = restoreEntriesOf(live);
  if (live === undefined || entries.includes(key)) return;
  await kube.patch(SecretType, namespace, name, {
    metadata: {
      resourceVersion: live.metadata.resourceVersion,
      // Entries this version cannot read are kept: written back as they were.
      annotations: { [annotations.restores]: JSON.stringify([...entries, key].slice(-restoreKeysLimit)) },
    },
  });
}
