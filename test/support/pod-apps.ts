import pg from "pg";
import { pino } from "pino";
import type { KubeClient } from "../../src/kube/client.ts";
import { createInformer, type Informer } from "../../src/kube/informer.ts";
import type { KubeConfig } from "../../src/kube/kubeconfig.ts";
import { SecretType, type KubeObject, type Secret } from "../../src/kube/types.ts";
import { decodeData } from "../../src/operator/secret/render.ts";
import { PodType } from "../../src/operator/secret/consumers.ts";

// The apps of a rotation test, played as a kubelet runs containers: one "app" per Running pod, with DATABASE_URL
// resolved from the Secret as it was when the pod was first seen (a kubelet resolves env once, when it starts the
// container; it never follows a later change), querying PostgreSQL in a loop until its pod is deleted or terminating
// (when a kubelet would send SIGTERM) or reported over. An app is a loop in this process, not a child process: what matters is its
// login and its lifetime, which follow the pod's exactly. Pods come from a watch (an informer), never a poll.

interface App {
  pod: string;
  url: string | undefined;
  queries: number;
  stopped: boolean;
  done: Promise<void>;
}

export interface PodApps {
  /** Failed queries, "pod: message", in the order they happened. */
  failures: string[];
  /** Successful queries of every app so far. */
  queries(): number;
  /** The apps running now, by pod name, and the DATABASE_URL each started with. */
  running(): Map<string, string | undefined>;
  /** Every DATABASE_URL an app has started with. */
  urls(): Set<string>;
  stop(): Promise<void>;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

/** The DATABASE_URL of the pod's first container: env secretKeyRef first, else envFrom secretRef, as a kubelet. */
async function resolveUrl(kube: KubeClient, pod: KubeObject): Promise<string | undefined> {
  const spec = pod["spec"] as { containers?: Obj[] } | undefined;
  const container = spec?.containers?.[0];
  if (container === undefined) return undefined;
  const read = async (name: string) => {
    const s = await kube.get<Secret>(SecretType, pod.metadata.namespace, name);
    return s === undefined ? {} : decodeData(s);
  };
  for (const e of (container["env"] as Obj[] | undefined) ?? []) {
    const ref = isObj(e["valueFrom"]) ? e["valueFrom"]["secretKeyRef"] : undefined;
    if (e["name"] === "DATABASE_URL" && isObj(ref)) return (await read(String(ref["name"])))[String(ref["key"])];
  }
  for (const e of (container["envFrom"] as Obj[] | undefined) ?? [])
    if (isObj(e["secretRef"])) {
      const url = (await read(String(e["secretRef"]["name"])))["DATABASE_URL"];
      if (url !== undefined) return url;
    }
  return undefined;
}

export async function startPodApps(args: {
  kubeConfig: KubeConfig;
  kube: KubeClient;
  namespace: string;
  /** Pause between two queries of one app (default 50 ms). */
  intervalMs?: number;
}): Promise<PodApps> {
  const intervalMs = args.intervalMs ?? 50;
  const failures: string[] = [];
  const apps = new Map<string, App>(); // uid → app
  const resolved = new Map<string, Promise<string | undefined>>(); // uid → env, resolved when first seen
  const urls = new Set<string>();
  let closed = false;

  function run(pod: KubeObject, url: string | undefined): App {
    const app: App = { pod: pod.metadata.name, url, queries: 0, stopped: false, done: Promise.resolve() };
    app.done = (async () => {
      if (url === undefined) return;
      urls.add(url);
      const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
      client.on("error", () => {}); // a terminated session is seen by the next query
      try {
        await client.connect();
        while (!app.stopped) {
          await client.query("select 1");
          app.queries++;
          await new Promise((r) => setTimeout(r, intervalMs));
        }
      } catch (err) {
        if (!app.stopped) failures.push(`${app.pod}: ${(err as Error).message}`);
      } finally {
        await client.end().catch(() => undefined);
      }
    })();
    return app;
  }

  function onEvent(event: "add" | "update" | "delete", pod: KubeObject) {
    const uid = pod.metadata.uid ?? pod.metadata.name;
    const phase = (pod["status"] as { phase?: string } | undefined)?.phase;
    // Deleted, terminating (a kubelet sends SIGTERM) or over (its process exited): the app stops.
    if (
      event === "delete" ||
      pod.metadata.deletionTimestamp !== undefined ||
      phase === "Succeeded" ||
      phase === "Failed"
    ) {
      const app = apps.get(uid);
      if (app !== undefined) app.stopped = true;
      resolved.delete(uid);
      return;
    }
    if (!resolved.has(uid)) resolved.set(uid, resolveUrl(args.kube, pod));
    if (phase !== "Running" || apps.has(uid) || closed) return;
    const placeholder: App = {
      pod: pod.metadata.name,
      url: undefined,
      queries: 0,
      stopped: false,
      done: Promise.resolve(),
    };
    apps.set(uid, placeholder);
    void resolved.get(uid)!.then((url) => {
      if (placeholder.stopped || closed) return;
      apps.set(uid, run(pod, url));
    });
  }

  const informer: Informer<KubeObject> = createInformer<KubeObject>({
    kubeConfig: args.kubeConfig,
    client: args.kube,
    type: PodType,
    namespace: args.namespace,
    onEvent,
    logger: pino({ level: "silent" }),
  });
  await informer.start();
  const live = () => [...apps.values()].filter((a) => !a.stopped);
  return {
    failures,
    queries: () => [...apps.values()].reduce((n, a) => n + a.queries, 0),
    running: () => new Map(live().map((a) => [a.pod, a.url])),
    urls: () => new Set(urls),
    async stop() {
      closed = true;
      for (const a of apps.values()) a.stopped = true;
      await informer.stop();
      await Promise.all([...apps.values()].map((a) => a.done));
    },
  };
}
