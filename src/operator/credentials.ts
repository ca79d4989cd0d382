import { createHash } from "node:crypto";
import type { Logger } from "pino";
import type { KubeClient } from "../kube/client.ts";
import { SecretType, type Secret } from "../kube/types.ts";
import type { CreateApiClient, MdsApi } from "./api.ts";
import { WaitingError } from "./errors.ts";
import { createRemoteMirror, type RemoteMirror } from "./remote-mirror.ts";

export interface SecretKeyRef {
  namespace: string;
  name: string;
  key: string;
}

/** One API client (so one rate budget) and one remote mirror per distinct token. */
export interface ApiContext {
  id: string;
  api: MdsApi;
  mirror: RemoteMirror;
}

/** A namespace's own credentials Secret: this name, the token under key "token" (docs/many-teams.md). */
export const namespaceCredentials = { name: "mds-credentials", key: "token" } as const;

/** Where a resource's token comes from: its spec, its namespace's own Secret, or the operator's. */
export type CredentialSource = "spec" | "namespace" | "operator";
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

export interface CredentialPool {
  resolve(ref: SecretKeyRef): Promise<ApiContext>;
  /** Keeps the Secret of `ref` (resolved before) while the resource depends on it: credentials-guard.ts. */
  guard(ref: SecretKeyRef): Promise<void>;
  /** Whether a Secret exists (cached briefly, found or not): a namespace's own credentials Secret is optional. */
  hasSecret(namespace: string, name: string): Promise<boolean>;
  contexts(): ApiContext[];
  stop(): void;
}

export function createCredentialPool(options: {
  kube: KubeClient;
  apiUrl: string;
  createApiClient: CreateApiClient;
  logger: Logger;
  pollIntervals: { fastMs: number; slowMs: number };
  onRemoteChange: (kind: "database" | "project", id: string) => void;
  /** How long a token read from a Secret is trusted before it is read again (a rotated token takes effect). */
  tokenTtlMs?: number;
  /** Adds the credentials finalizer (absent: Secrets are not guarded, as in unit tests). */
  protect?: (secret: Secret) => Promise<void>;
}): CredentialPool {
  const tokenTtlMs = options.tokenTtlMs ?? 30_000;
  const contexts = new Map<string, ApiContext>();
  // One read of a Secret serves its tokens, the check whether a namespace has its own, and the guard. Kept
  // `tokenTtlMs` when found (a rotated token takes effect after it), 5 s when missing (one just created is seen soon).
  // `guarded`: the finalizer is on the Secret as read (or was added since), so guarding again costs nothing.
  const secrets = new Map<string, { secret: Secret | undefined; at: number; guarded: boolean }>();

  async function readSecret(namespace: string, name: string) {
    const cacheKey = `${namespace}/${name}`;
    const cached = secrets.get(cacheKey);
    if (cached !== undefined && Date.now() - cached.at < (cached.secret === undefined ? 5_000 : tokenTtlMs)) return cached;
    const entry = { secret: await options.kube.get<Secret>(SecretType, namespace, name), at: Date.now(), guarded: false };
    secrets.set(cacheKey, entry);
    return entry;
  }

  async function readToken(ref: SecretKeyRef): Promise<string> {
    const { secret } = await readSecret(ref.namespace, ref.name);
    if (secret === undefined) {
      throw new WaitingError("CredentialsMissing", `credentials Secret "${ref.namespace}/${ref.name}" not found; create it with the API token under key "${ref.key}"`);
    }
    const value = secret.data?.[ref.key] ?? undefined;
    const token = value === undefined ? secret.stringData?.[ref.key] : Buffer.from(value, "base64").toString("utf8");
    if (token === undefined || token.trim() === "") {
      throw new WaitingError("CredentialsMissing", `credentials Secret "${ref.namespace}/${ref.name}" has no key "${ref.key}"`);
    }
    return token.trim();
  }

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
      let ctx = contexts.get(id);
      if (ctx === undefined) {
        const api = options.createApiClient({ baseUrl: options.apiUrl, token });
        const mirror = createRemoteMirror({
          api,
          logger: options.logger.child({ credential: id }),
          maxAgeMs: options.pollIntervals.slowMs * 2 + 5_000,
          fastMs: options.pollIntervals.fastMs,
          onChange: options.onRemoteChange,
        });
        mirror.start(options.pollIntervals.slowMs);
        ctx = { id, api, mirror };
        contexts.set(id, ctx);
      }
      return ctx;
    },
    contexts: () => [...contexts.values()],
    stop() {
      for (const c of contexts.values()) c.mirror.stop();
    },
  };
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
  if (specRef !== undefined) return { ref: { namespace, name: specRef.name, key: specRef.key ?? "token" }, source: "spec" };
  const own = { namespace: operator.secretNamespace, name: operator.secretName, key: operator.key };
  if (namespace === own.namespace && namespaceCredentials.name === own.name) return { ref: own, source: "operator" };
  if (await pool.hasSecret(namespace, namespaceCredentials.name)) return { ref: { namespace, ...namespaceCredentials }, source: "namespace" };
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
