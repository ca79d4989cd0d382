import type { Logger } from "pino";
import type { KubeClient } from "../kube/client.ts";
import { KubeConflictError } from "../kube/errors.ts";
import { SecretType, type KubeObject, type Secret } from "../kube/types.ts";
import { namespaceCredentials } from "./credentials.ts";

// A team's credentials Secret must outlive the resources that act with it: deleting a namespace deletes the Secret
// and the resources at once, and a resource with deletionPolicy Delete needs the token to delete its remote object.
// So while resources depend on a Secret (their status.credentials names it) it carries a finalizer; the Secret stays
// Terminating, still readable, until the last dependent is gone, then the operator removes the finalizer. The
// operator's own Secret is not guarded: its namespace is the operator's, and it has no rights to patch it.

export const credentialsFinalizer = "mds.dev/credentials-in-use";
/** Set with the finalizer, so a restarted operator finds the Secrets it guards with one list. */
export const credentialsLabel = "mds.dev/credentials-in-use";

export interface CredentialsGuard {
  /** Adds the finalizer to a Secret just read (unless it has it, or is being deleted: nothing may be added then). */
  protect(secret: Secret): Promise<void>;
  /** Removes the finalizer from `namespace/name` if no resource depends on it. */
  release(namespace: string, name: string): Promise<void>;
  /** release() for every guarded Secret: at start, and on the settled interval (a resource that changed credentials). */
  sweep(): Promise<void>;
}

/** "<namespace>/<name>" of the Secret a resource's status says it acts with, if any. */
export function credentialsSecretOf(obj: KubeObject): string | undefined {
  return (obj["status"] as { credentials?: { secret?: string } } | undefined)?.credentials?.secret;
}

// eslint-disable-next-line max-lines-per-function -- closure factory: the guard's short functions share its cache and timers
export function createCredentialsGuard(options: {
  kube: KubeClient;
  /**
   * The cached objects of one namespace that need the operator to be deleted (they carry the loop's finalizer). By
   * namespace: unpacking every cached object per release (each deletion) or per sweep cost seconds at 10,000.
   */
  dependents: (namespace: string) => KubeObject[];
  /** The watched namespaces (undefined: all). */
  namespaces: (string | undefined)[];
  logger: Logger;
}): CredentialsGuard {
  const { kube, logger } = options;

  /**
   * Whether a resource of the Secret's namespace still needs `namespace/name` to be deleted: one names it in status
   * or in its spec (or, without spec.credentials, may use the namespace's mds-credentials), or one has not said yet
   * which Secret it uses (never reconciled since the upgrade, or between its first token read and its first status
   * write). Erring this way only keeps a finalizer a little longer. Resources without the loop's finalizer (a
   * restore, an ObserveOnly resource) need nothing from the operator to go away, so they never count.
   */
  function inUse(namespace: string, name: string, objects: KubeObject[]): boolean {
    const key = `${namespace}/${name}`;
    // A Connection elsewhere acting with it does not hold it. The spec counts: a resource that just moved to this
    // Secret names it there before its status does (a sweep in between must not release it).
    return objects.some((o) => {
      if (o.metadata.namespace !== namespace) return false;
      const secret = credentialsSecretOf(o);
      const specRef = (o["spec"] as { credentials?: { secretRef?: { name?: string } } } | undefined)?.credentials
        ?.secretRef?.name;
      return (
        secret === key ||
        secret === undefined ||
        specRef === name ||
        (specRef === undefined && name === namespaceCredentials.name)
      );
    });
  }

  async function unguard(secret: Secret): Promise<void> {
    const fins = secret.metadata.finalizers ?? [];
    if (!fins.includes(credentialsFinalizer)) return;
    await kube.patch(SecretType, secret.metadata.namespace, secret.metadata.name, {
      metadata: {
        resourceVersion: secret.metadata.resourceVersion,
        finalizers: fins.filter((f) => f !== credentialsFinalizer),
        ...(secret.metadata.deletionTimestamp === undefined ? { labels: { [credentialsLabel]: null } } : {}),
      },
    });
    logger.info(
      { namespace: secret.metadata.namespace, secret: secret.metadata.name },
      "Released credentials Secret: no resource depends on it",
    );
  }

  return {
    async protect(seen) {
      const guard = (secret: Secret) => {
        const fins = secret.metadata.finalizers ?? [];
        if (fins.includes(credentialsFinalizer) || secret.metadata.deletionTimestamp !== undefined)
          return Promise.resolve();
        return kube.patch(SecretType, secret.metadata.namespace, secret.metadata.name, {
          metadata: {
            resourceVersion: secret.metadata.resourceVersion,
            finalizers: [...fins, credentialsFinalizer],
            labels: { [credentialsLabel]: "true" },
          },
        });
      };
      try {
        await guard(seen);
      } catch (err) {
        // The copy read with the token may be older than the Secret (edited since): once more from the live one.
        if (!(err instanceof KubeConflictError)) throw err;
        const live = await kube.get<Secret>(SecretType, seen.metadata.namespace, seen.metadata.name);
        if (live !== undefined) await guard(live);
      }
    },
    async release(namespace, name) {
      if (inUse(namespace, name, options.dependents(namespace))) return;
      const secret = await kube.get<Secret>(SecretType, namespace, name);
      if (secret !== undefined) await unguard(secret);
    },
    async sweep() {
      for (const namespace of options.namespaces) {
        const guarded = await kube.list<Secret>(SecretType, {
          ...(namespace === undefined ? {} : { namespace }),
          labelSelector: credentialsLabel,
        });
        // One namespace's objects at a time, dropped before the next: held across all of them, 10,000 unpacked
        // objects are ~14 MB of heap for as long as the sweep's patches take.
        const byNamespace = Map.groupBy(guarded.items, (secret) => secret.metadata.namespace ?? "");
        for (const [ns, secrets] of byNamespace) {
          const dependents = options.dependents(ns);
          for (const secret of secrets) {
            if (inUse(ns, secret.metadata.name, dependents)) continue;
            await unguard(secret).catch((err: unknown) =>
              logger.warn(
                { err, namespace: secret.metadata.namespace, secret: secret.metadata.name },
                "Could not release credentials Secret",
              ),
            );
          }
        }
      }
    },
  };
}
