import type { KubeClient } from "../kube/client.ts";
import { isKubeConflict, isKubeNotFound } from "../kube/errors.ts";
import type { KubeObject, ResourceType } from "../kube/types.ts";
import { CrdType } from "../webhook/crd-ca-bundle.ts";

// A storage migration of the mds.dev CRDs, as kube-storage-version-migrator does one: every object is read in the
// storage version and written back unchanged, which makes the API server store it in that version (an object
// already stored so is not written again: same bytes, same resourceVersion); then the CRD's status.storedVersions
// drops every other version, so a later release may stop serving them. Safe to interrupt and run again: it starts
// over, and what was done already costs a read.

interface Crd extends KubeObject {
  spec: {
    group: string;
    names: { plural: string; kind: string };
    scope: string;
    versions: { name: string; storage: boolean }[];
  };
  status?: { storedVersions?: string[] };
}

interface MigrationReport {
  crd: string;
  storageVersion: string;
  before: string[];
  /** Objects written back (absent when nothing needed migrating). */
  rewritten?: number;
}

interface Options {
  kube: KubeClient;
  crdNames: readonly string[];
  /** Objects written per second at most, so a large migration does not crowd the API server. */
  perSecond: number;
  log: (line: string) => void;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Writes one object back; a newer object (409) is read again, a deleted one (404) needs nothing. */
async function rewrite(kube: KubeClient, type: ResourceType, obj: KubeObject): Promise<void> {
  let current: KubeObject | undefined = obj;
  for (let attempt = 0; current; attempt++) {
    try {
      await kube.replace(type, current);
      return;
    } catch (err) {
      if (isKubeNotFound(err)) return;
      if (!isKubeConflict(err) || attempt >= 5) throw err;
      current = await kube.get(type, current.metadata.namespace, current.metadata.name);
    }
  }
}

export async function migrateStorage(options: Options): Promise<MigrationReport[]> {
  const { kube, log } = options;
  const reports: MigrationReport[] = [];
  const pause = 1000 / options.perSecond;
  for (const name of options.crdNames) {
    const crd = await kube.get<Crd>(CrdType, undefined, name);
    if (!crd) {
      log(`${name}: not installed, nothing to migrate`);
      continue;
    }
    const storageVersion = crd.spec.versions.find((v) => v.storage)?.name;
    if (!storageVersion) throw new Error(`${name} has no storage version`);
    const before = crd.status?.storedVersions ?? [];
    if (before.length === 1 && before[0] === storageVersion) {
      log(`${name}: stored in ${storageVersion} only, nothing to migrate`);
      reports.push({ crd: name, storageVersion, before });
      continue;
    }
    const type: ResourceType = {
      group: crd.spec.group,
      version: storageVersion,
      plural: crd.spec.names.plural,
      kind: crd.spec.names.kind,
      namespaced: crd.spec.scope === "Namespaced",
    };
    let rewritten = 0;
    let next: string | undefined;
    do {
      const page = await kube.list(type, { limit: 100, continue: next });
      for (const obj of page.items) {
        await rewrite(kube, type, { ...obj, apiVersion: `${type.group}/${storageVersion}`, kind: type.kind });
        rewritten++;
        await sleep(pause);
      }
      next = page.metadata?.continue || undefined;
    } while (next);
    // Only when the storage version is still the one every object was written in: a CRD changed meanwhile (another
    // release applied) needs another run. The resourceVersion precondition makes the check and the write one step.
    const now = await kube.get<Crd>(CrdType, undefined, name);
    if (now?.spec.versions.find((v) => v.storage)?.name !== storageVersion)
      throw new Error(`${name}: its storage version changed during the migration; run mds migrate-storage again`);
    await kube.patchStatus(CrdType, undefined, name, {
      metadata: { resourceVersion: now.metadata.resourceVersion },
      status: { storedVersions: [storageVersion] },
    });
    log(
      `${name}: ${rewritten} object(s) written back in ${storageVersion}; storedVersions [${before.join(", ")}] → [${storageVersion}]`,
    );
    reports.push({ crd: name, storageVersion, before, rewritten });
  }
  return reports;
}
