import { createHash, createHmac } from "node:crypto";
import type { Logger } from "pino";
import type { KubeClient } from "../kube/client.ts";
import { SecretType, type Secret } from "../kube/types.ts";
import type { ClientHooks, ClientLogger, RateLimitOptions } from "../client/index.ts";
import { errorCode } from "./api.ts";
import { WaitingError } from "./errors.ts";

export interface SecretKeyRef {
  namespace: string;
  name: string;
  key: string;
}

/**
 * What one credential gives the kinds: a client of the service and a mirror of remote state that polls with it. The
 * operator builds both per token from a `RemoteDefinition` and never calls their methods: the kinds declare them
 * (src/resources/remote/remote-api.ts).
 */
export interface RemoteState {
  api: object;
  mirror: Poller;
}
interface Poller {
  /** Lists remote state every `intervalMs` until stopped. */
  start(intervalMs: number): void;
  stop(): void;
}

/** How the operator builds a credential's `RemoteState`. */
export interface RemoteDefinition<R extends RemoteState> {
  /** The client of one token: the operator passes its metrics hooks, logger and rate budget. */
  client(options: {
    baseUrl: string;
    token: string;
    hooks: ClientHooks;
    logger: ClientLogger;
    rateLimit?: RateLimitOptions;
  }): R["api"];
  /** The client's methods that write: refused by a replica that is not the leader (index.ts). */
  writes: readonly string[];
  /** The credential's mirror over its (already guarded) client; `onChange` wakes the resources of a changed id. */
  mirror(options: MirrorOptions<R["api"]>): R["mirror"];
}
interface MirrorOptions<Api> {
  api: Api;
  logger: Logger;
  /** Settled entries younger than this are served without a call. */
  maxAgeMs: number;
  /** An unsettled entry is read again at most this often. */
  fastMs: number;
  onChange: (what: string, id: string) => void;
}

/**
 * One API client (so one rate budget) and one remote mirror per distinct token. Contexts are not kept forever (issue
 * 22: a team rotating garbage tokens piled up pollers): a context goes when the service refuses its token (401), when
 * no resource has resolved it for `idleMs`, when the last Secret that held its token now holds another, and, past
 * `maxContexts`, the least recently used goes first.
 */
export interface ApiContext<R extends RemoteState = RemoteState> {
  id: string;
  api: R["api"];
  mirror: R["mirror"];
  /**
   * A tag over `message` that only a holder of this token can compute (HMAC-SHA256 keyed by it): what the operator
   * records where a tenant may write too (a status) is checked with it, so a forged record never passes. The token
   * itself is never written anywhere.
   */
  seal(message: string): string;
}

/** A namespace's own credentials Secret: this name, the token under key "token" (docs/many-teams.md). */
export const namespaceCredentials = { name: "mds-credentials", key: "token" } as const;

/** Where a resource's token comes from: its spec, its namespace's own Secret, or the operator's. */
type CredentialSource = "spec" | "namespace" | "operator";
export interface CredentialUse {
  ref: SecretKeyRef;
  source: CredentialSource;
}

/** The operator's own Secret and the namespaces whose resources may fall back to it ("*": every namespace). */
export interface OperatorCredentials {
  secretNamespace: string;
  secretName: string;
  key: string;
  /** Default: only the operator's own namespace (the Secret's): another team's namespace never borrows its token. */
  fallbackNamespaces?: "*" | readonly string[] | undefined;
}

export interface CredentialPool<R extends RemoteState = RemoteState> {
  resolve(ref: SecretKeyRef): Promise<ApiContext<R>>;
  /** Keeps the Secret of `ref` (resolved before) while the resource depends on it: credentials-guard.ts. */
  guard(ref: SecretKeyRef): Promise<void>;
  /** Whether a Secret exists (cached briefly, found or not): a namespace's own credentials Secret is optional. */
  hasSecret(namespace: string, name: string): Promise<boolean>;
  contexts(): ApiContext<R>[];
  stop(): void;
}

/** Why a context was dropped (the label of mds_operator_api_context_evictions_total). */
type EvictionReason = "refused" | "idle" | "rotated" | "capacity";

/** After a 401 the token is not tried again for this long, doubling per refusal in a row up to `maxMs`. */
const refusedBackoff = { initialMs: 5_000, maxMs: 300_000 } as const;

// eslint-disable-next-line max-lines-per-function -- a factory: its closure is the pool's state (contexts, refusals, cached Secrets); each method is short
export function createCredentialPool<R extends RemoteState>(options: {
  kube: KubeClient;
  apiUrl: string;
  /** The client of one token (index.ts: the remote definition's, with metrics, logger, budget and leader gate). */
  createApiClient: (options: { baseUrl: string; token: string }) => R["api"];
  /** The mirror of one token (the remote definition's `mirror`). */
  createMirror: (options: MirrorOptions<R["api"]>) => R["mirror"];
  logger: Logger;
  pollIntervals: { fastMs: number; slowMs: number };
  onRemoteChange: (what: string, id: string) => void;
  /** How long a token read from a Secret is trusted before it is read again (a rotated token takes effect). */
  tokenTtlMs?: number;
  /** Adds the credentials finalizer (absent: Secrets are not guarded, as in unit tests). */
  protect?: (secret: Secret) => Promise<void>;
  /** At most this many live contexts (each an API client and a polling mirror); default 500. */
  maxContexts?: number;
  /** A context no resource has resolved for this long is dropped; default four settled intervals (every resource resyncs at least once per settled interval, so a context in use never looks idle). */
  idleMs?: number;
  /** Backoff of a refused token (default `refusedBackoff`). */
  backoff?: { initialMs: number; maxMs: number };
  /** Reports the number of live contexts and each eviction (metrics.ts: mds_operator_api_contexts). */
  onContexts?: (live: number, evicted?: EvictionReason) => void;
  now?: () => number;
}): CredentialPool<R> {
  const tokenTtlMs = options.tokenTtlMs ?? 30_000;
  const maxContexts = options.maxContexts ?? 500;
  const idleMs = options.idleMs ?? options.pollIntervals.slowMs * 4;
  const backoff = options.backoff ?? refusedBackoff;
  const now = options.now ?? (() => Date.now());
  // In least-recently-resolved order (re-inserted on every resolve), so the first entry is the one to drop.
  type Entry = ApiContext<R> & { usedAt: number; refs: Set<string> };
  const contexts = new Map<string, Entry>();
  /** Which token (context id) each Secret key last held: a Secret that now holds another token no longer uses the old one. */
  const tokenOfRef = new Map<string, string>();
  /** Tokens the service refused (401): not tried again before `retryAt`. Bounded like the contexts. */
  const refused = new Map<string, { times: number; retryAt: number }>();
  // One read of a Secret serves its tokens, the check whether a namespace has its own, and the guard. Kept
  // `tokenTtlMs` when found (a rotated token takes effect after it), 5 s when missing (one just created is seen soon).
  // `guarded`: the finalizer is on the Secret as read (or was added since), so guarding again costs nothing.
  const secrets = new Map<string, { secret: Secret | undefined; at: number; guarded: boolean }>();

  async function readSecret(namespace: string, name: string) {
    const cacheKey = `${namespace}/${name}`;
    const cached = secrets.get(cacheKey);
    if (cached !== undefined && Date.now() - cached.at < (cached.secret === undefined ? 5_000 : tokenTtlMs))
      return cached;
    const entry = {
      secret: await options.kube.get<Secret>(SecretType, namespace, name),
      at: Date.now(),
      guarded: false,
    };
    secrets.set(cacheKey, entry);
    return entry;
  }

  async function readToken(ref: SecretKeyRef): Promise<string> {
    const { secret } = await readSecret(ref.namespace, ref.name);
    if (secret === undefined) {
      throw new WaitingError(
        "CredentialsMissing",
        `credentials Secret "${ref.namespace}/${ref.name}" not found; create it with the API token under key "${ref.key}"`,
      );
    }
    const value = secret.data?.[ref.key] ?? undefined;
    const token = value === undefined ? secret.stringData?.[ref.key] : Buffer.from(value, "base64").toString("utf8");
    if (token === undefined || token.trim() === "") {
      throw new WaitingError(
        "CredentialsMissing",
        `credentials Secret "${ref.namespace}/${ref.name}" has no key "${ref.key}"`,
      );
    }
    return token.trim();
  }

  // Idle contexts also go while nothing resolves (a team that stopped leaves no poller behind).
  const idleTimer = setInterval(sweepIdle, Math.min(idleMs, 60_000));
  idleTimer.unref();

  return {
    async guard(ref) {
      const cached = secrets.get(`${ref.namespace}/${ref.name}`);
      if (cached?.secret === undefined || cached.guarded || options.protect === undefined) return;
      await options.protect(cached.secret);
      cached.guarded = true;
    },
    hasSecret: async (namespace, name) => (await readSecret(namespace, name)).secret !== undefined,
    async resolve(ref) {
      const token = await readToken(ref);
      const id = createHash("sha256").update(token).digest("hex").slice(0, 16);
      const refKey = `${ref.namespace}/${ref.name}/${ref.key}`;
      const previous = tokenOfRef.get(refKey);
      if (previous !== id) {
        tokenOfRef.set(refKey, id);
        const old = previous === undefined ? undefined : contexts.get(previous);
        old?.refs.delete(refKey);
        if (old !== undefined && old.refs.size === 0) evict(old.id, "rotated");
      }
      const denied = refused.get(id);
      if (denied !== undefined && now() < denied.retryAt) {
        // The message stays the same until the next refusal (no countdown): a status that changed on every reconcile
        // would be written, and watched, on every one.
        throw new WaitingError(
          "CredentialsInvalid",
          `the API refused the token in Secret "${ref.namespace}/${ref.name}" (key "${ref.key}"); put a valid token there (a new one is used within 30 s; this one is tried again after ${Math.round(Math.min(backoff.maxMs, backoff.initialMs * 2 ** (denied.times - 1)) / 1000)} s)`,
        );
      }
      sweepIdle();
      let ctx = contexts.get(id);
      if (ctx === undefined) {
        ctx = open(id, token);
        contexts.set(id, ctx);
        while (contexts.size > maxContexts) evict(contexts.keys().next().value!, "capacity");
        report();
      } else {
        contexts.delete(id);
        contexts.set(id, ctx);
      }
      ctx.usedAt = now();
      ctx.refs.add(refKey);
      return ctx;
    },
    contexts: () => [...contexts.values()],
    stop() {
      clearInterval(idleTimer);
      for (const c of contexts.values()) c.mirror.stop();
    },
  };

  function open(id: string, token: string): Entry {
    const api = watchRefusals(options.createApiClient({ baseUrl: options.apiUrl, token }), id);
    const mirror = options.createMirror({
      api,
      logger: options.logger.child({ credential: id }),
      maxAgeMs: options.pollIntervals.slowMs * 2 + 5_000,
      fastMs: options.pollIntervals.fastMs,
      onChange: options.onRemoteChange,
    });
    mirror.start(options.pollIntervals.slowMs);
    const seal = (message: string) =>
      createHmac("sha256", token).update(`mds-seal\u0000${message}`).digest("base64url");
    return { id, api, mirror, seal, usedAt: now(), refs: new Set<string>() };
  }

  function evict(id: string, reason: EvictionReason) {
    const ctx = contexts.get(id);
    if (ctx === undefined) return;
    ctx.mirror.stop();
    contexts.delete(id);
    for (const refKey of ctx.refs) if (tokenOfRef.get(refKey) === id) tokenOfRef.delete(refKey);
    options.logger.info({ credential: id, reason }, "Dropped the API context of a credential");
    report(reason);
  }

  function report(evicted?: EvictionReason) {
    options.onContexts?.(contexts.size, evicted);
  }

  function sweepIdle() {
    const cutoff = now() - idleMs;
    // Least recently resolved first: stop at the first one still in use.
    for (const ctx of contexts.values()) {
      if (ctx.usedAt > cutoff) break;
      evict(ctx.id, "idle");
    }
  }

  /** A 401 from any call (a reconcile's or the mirror's polling) drops the context and backs the token off. */
  function watchRefusals<Api extends object>(api: Api, id: string): Api {
    const onRefused = () => {
      // Calls in flight together are refused together: one refusal, one step of backoff.
      if (!contexts.has(id)) return;
      const times = (refused.get(id)?.times ?? 0) + 1;
      refused.delete(id);
      refused.set(id, { times, retryAt: now() + Math.min(backoff.maxMs, backoff.initialMs * 2 ** (times - 1)) });
      if (refused.size > maxContexts) refused.delete(refused.keys().next().value!);
      evict(id, "refused");
    };
    return new Proxy(api, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver) as unknown;
        if (typeof value !== "function") return value;
        return (...args: unknown[]) => {
          const result = (value as (...a: unknown[]) => unknown).apply(target, args);
          if (!(result instanceof Promise)) return result;
          return result.then(
            (ok: unknown) => {
              // Accepted again (the backoff ran out and the token works now): the next refusal starts from the shortest wait.
              refused.delete(id);
              return ok;
            },
            (err: unknown) => {
              if (errorCode(err) === "unauthorized") onRefused();
              throw err;
            },
          );
        };
      },
    });
  }
}

/**
 * The token of a resource in `namespace`: its spec's Secret, else the namespace's own `mds-credentials`, else the
 * operator's, where that namespace may fall back to it. Nothing else: a team's resources never act with a token
 * the platform team did not give that namespace.
 */
export async function chooseCredentials(
  pool: Pick<CredentialPool, "hasSecret">,
  operator: OperatorCredentials,
  namespace: string,
  specRef: { name: string; key?: string | undefined } | undefined,
): Promise<CredentialUse> {
  // `key` defaults to "token" (the CRD defaults it; a raw object read elsewhere may predate that).
  if (specRef !== undefined)
    return { ref: { namespace, name: specRef.name, key: specRef.key ?? "token" }, source: "spec" };
  const own = { namespace: operator.secretNamespace, name: operator.secretName, key: operator.key };
  if (namespace === own.namespace && namespaceCredentials.name === own.name) return { ref: own, source: "operator" };
  if (await pool.hasSecret(namespace, namespaceCredentials.name))
    return { ref: { namespace, ...namespaceCredentials }, source: "namespace" };
  const fallback = operator.fallbackNamespaces ?? [own.namespace];
  if (fallback === "*" || fallback.includes(namespace)) return { ref: own, source: "operator" };
  throw new WaitingError(
    "CredentialsMissing",
    `no API token for namespace "${namespace}": create Secret "${namespace}/${namespaceCredentials.name}" with the token under key "${namespaceCredentials.key}", or set spec.credentials.secretRef (the operator's own token serves only namespaces ${fallback.map((n) => `"${n}"`).join(", ")})`,
  );
}

/** status.credentials: which Secret a resource's token came from (never the token). */
export function credentialStatusOf(use: CredentialUse): { secret: string; key: string; source: CredentialSource } {
  return { secret: `${use.ref.namespace}/${use.ref.name}`, key: use.ref.key, source: use.source };
}
