import { KubeConfig, KubernetesObjectApi, PatchStrategy, type KubernetesObject } from "@kubernetes/client-node";

// The chaos harness and the benchmarks act as a user would: create, patch, read and delete objects
// through client-node's generic object API (discovery-driven, so it works for the CRDs too).

export interface KubeObject extends KubernetesObject {
  metadata: NonNullable<KubernetesObject["metadata"]> & { name: string };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
  data?: Record<string, string>;
}

export interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  observedGeneration?: number;
}

export interface KubeObjects {
  kubeConfig: KubeConfig;
  api: KubernetesObjectApi;
  get(apiVersion: string, kind: string, namespace: string, name: string): Promise<KubeObject | undefined>;
  list(apiVersion: string, kind: string, namespace?: string): Promise<KubeObject[]>;
  /** Creates, or merge-patches when it exists (like `kubectl apply` for our purposes). */
  apply(obj: KubeObject): Promise<KubeObject>;
  mergePatch(
    apiVersion: string,
    kind: string,
    namespace: string,
    name: string,
    patch: Record<string, unknown>,
  ): Promise<KubeObject>;
  /** Resolves whether or not it existed. */
  remove(apiVersion: string, kind: string, namespace: string, name: string): Promise<void>;
  /** Secret data decoded from base64. */
  secretData(namespace: string, name: string): Promise<Record<string, string> | undefined>;
}

export function loadKubeConfig(kubeconfig: KubeConfig | string): KubeConfig {
  if (typeof kubeconfig !== "string") return kubeconfig;
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  return kc;
}

function isNotFound(error: unknown): boolean {
  return (error as { code?: number }).code === 404;
}

export function createKubeObjects(kubeconfig: KubeConfig | string): KubeObjects {
  const kubeConfig = loadKubeConfig(kubeconfig);
  const api = KubernetesObjectApi.makeApiClient(kubeConfig);
  const header = (apiVersion: string, kind: string, namespace: string, name: string) => ({
    apiVersion,
    kind,
    metadata: { namespace, name },
  });

  const self: KubeObjects = {
    kubeConfig,
    api,
    async get(apiVersion, kind, namespace, name) {
      try {
        return (await api.read(header(apiVersion, kind, namespace, name))) as KubeObject;
      } catch (error) {
        if (isNotFound(error)) return undefined;
        throw error;
      }
    },
    async list(apiVersion, kind, namespace) {
      const list = await api.list<KubeObject>(apiVersion, kind, namespace);
      return list.items;
    },
    async apply(obj) {
      try {
        return (await api.create(obj)) as KubeObject;
      } catch (error) {
        if ((error as { code?: number }).code !== 409) throw error;
        return (await api.patch(obj, undefined, undefined, "chaos", undefined, PatchStrategy.MergePatch)) as KubeObject;
      }
    },
    async mergePatch(apiVersion, kind, namespace, name, patch) {
      const head = header(apiVersion, kind, namespace, name);
      const metadata = { ...((patch["metadata"] as Record<string, unknown> | undefined) ?? {}), ...head.metadata };
      return (await api.patch(
        { ...patch, ...head, metadata },
        undefined,
        undefined,
        "chaos",
        undefined,
        PatchStrategy.MergePatch,
      )) as KubeObject;
    },
    async remove(apiVersion, kind, namespace, name) {
      try {
        await api.delete(header(apiVersion, kind, namespace, name));
      } catch (error) {
        if (!isNotFound(error)) throw error;
      }
    },
    async secretData(namespace, name) {
      const secret = await self.get("v1", "Secret", namespace, name);
      if (secret === undefined) return undefined;
      const out: Record<string, string> = {};
      for (const [k, v] of Object.entries(secret.data ?? {})) out[k] = Buffer.from(v, "base64").toString("utf8");
      return out;
    },
  };
  return self;
}

export function conditionOf(obj: KubeObject | undefined, type: string): Condition | undefined {
  const conditions = (obj?.status?.["conditions"] ?? []) as Condition[];
  return conditions.find((c) => c.type === type);
}

/** Ready=True computed from the current generation. */
export function isReady(obj: KubeObject | undefined): boolean {
  const ready = conditionOf(obj, "Ready");
  return (
    ready?.status === "True" &&
    (ready.observedGeneration === undefined || ready.observedGeneration === obj?.metadata.generation)
  );
}
