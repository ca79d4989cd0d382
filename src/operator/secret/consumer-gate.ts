import type { KubeClient } from "../../kube/client.ts";
import { SecretType, type Secret } from "../../kube/types.ts";
import type { ConsumerIndex } from "./consumer-index.ts";
import {
  podMayHoldOld,
  restartAnnotationOf,
  restartApplyBody,
  restartFieldManager,
  rolloutPending,
  templateAnnotationsOf,
  workloadTypes,
} from "./consumers.ts";
import { annotations } from "./render.ts";

// A rotation's view of one Secret's consumers: roll them (Restart) and say what the revocation of the old
// credentials still waits for. Only the Secret's own namespace is ever looked at or written: the index is keyed by
// it, and every write names it.

/** At most this many consumers are named in status and messages; the rest are counted. */
const maxNamed = 10;

export interface ConsumerGate {
  /** Sets the restart annotation (the Secret's data hash) on each workload whose template lacks it; their names. */
  restart(): Promise<string[]>;
  /** What still may use the credentials the Secret held before `writtenAt` (ms); empty when nothing does. */
  waitingFor(writtenAt: number, restarted: boolean): Promise<string[]>;
  /** Whether a workload or pod of the namespace uses the Secret (the index only: no call). */
  inUse(): boolean;
}

export function consumerGate(args: {
  kube: KubeClient;
  index: ConsumerIndex;
  namespace: string;
  secretName: string;
}): ConsumerGate {
  const { kube, index, namespace, secretName } = args;
  const key = restartAnnotationOf(secretName);
  let hash: string | undefined;
  /**
   * The Secret's data hash now, read live (a cached copy may lag behind the rotation just written) and only when
   * there are consumers: a rotation without any costs no call.
   */
  async function dataHash(): Promise<string | undefined> {
    if (hash !== undefined) return hash;
    const secret = await kube.get<Secret>(SecretType, namespace, secretName);
    hash = secret?.metadata.annotations?.[annotations.dataHash];
    return hash;
  }

  return {
    inUse() {
      const { workloads, pods } = index.of(namespace, secretName);
      return workloads.length > 0 || pods.length > 0;
    },
    async restart() {
      const { workloads } = index.of(namespace, secretName);
      if (workloads.length === 0 || kube.apply === undefined) return [];
      const current = await dataHash();
      if (current === undefined) return [];
      const restarted: string[] = [];
      for (const w of workloads) {
        const template = templateAnnotationsOf(w);
        if (template[key] === current) continue;
        const type = workloadTypes.find((t) => t.kind === w.kind);
        if (type === undefined) continue;
        // The annotations this field manager set for other Secrets go along: an apply drops what its manager no
        // longer names.
        const ours = Object.fromEntries(Object.entries(template).filter(([k]) => k.startsWith("rotation.mds.dev/")));
        await kube.apply(
          type,
          restartApplyBody({ ...w, metadata: { ...w.metadata, namespace } }, { ...ours, [key]: current }),
          restartFieldManager,
        );
        restarted.push(`${w.kind}/${w.metadata.name}`);
      }
      return restarted;
    },
    async waitingFor(writtenAt, restarted) {
      const { workloads, pods } = index.of(namespace, secretName);
      if (workloads.length === 0 && pods.length === 0) return [];
      const current = restarted ? await dataHash() : undefined;
      const waiting: string[] = [];
      for (const w of workloads) {
        if (current !== undefined && templateAnnotationsOf(w)[key] !== current) {
          waiting.push(`${w.kind}/${w.metadata.name}: not restarted yet`);
          continue;
        }
        const pending = rolloutPending(w);
        if (pending !== undefined) waiting.push(`${w.kind}/${w.metadata.name}: ${pending}`);
      }
      const stamp = current === undefined ? undefined : { key, hash: current };
      const old = pods.filter((p) => podMayHoldOld(p, writtenAt, stamp)).map((p) => p.metadata.name);
      if (old.length > 0)
        waiting.push(
          `${old.length} pod${old.length === 1 ? "" : "s"} started before the rotation (${old.slice(0, 3).join(", ")}${old.length > 3 ? ", …" : ""})`,
        );
      return waiting.length <= maxNamed
        ? waiting
        : [...waiting.slice(0, maxNamed - 1), `and ${waiting.length - maxNamed + 1} more`];
    },
  };
}
