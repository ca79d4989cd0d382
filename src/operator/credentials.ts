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

export interface CredentialPool {
  resolve(ref: SecretKeyRef): Promise<ApiContext>;
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
}): CredentialPool {
  const tokenTtlMs = options.tokenTtlMs ?? 30_000;
  const tokens = new Map<string, { token: string; at: number }>();
  const contexts = new Map<string, ApiContext>();

  async function readToken(ref: SecretKeyRef): Promise<string> {
    const cacheKey = `${ref.namespace}/${ref.name}#${ref.key}`;
    const cached = tokens.get(cacheKey);
    if (cached !== undefined && Date.now() - cached.at < tokenTtlMs) return cached.token;
    const secret = await options.kube.get<Secret>(SecretType, ref.namespace, ref.name);
    if (secret === undefined) {
      throw new WaitingError("CredentialsMissing", `credentials Secret "${ref.namespace}/${ref.name}" not found; create it with the API token under key "${ref.key}"`);
    }
    const value = secret.data?.[ref.key] ?? undefined;
    const token = value === undefined ? secret.stringData?.[ref.key] : Buffer.from(value, "base64").toString("utf8");
    if (token === undefined || token.trim() === "") {
      throw new WaitingError("CredentialsMissing", `credentials Secret "${ref.namespace}/${ref.name}" has no key "${ref.key}"`);
    }
    tokens.set(cacheKey, { token: token.trim(), at: Date.now() });
    return token.trim();
  }

  return {
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
