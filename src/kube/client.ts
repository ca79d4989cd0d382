import { fetch, type Dispatcher, type Response } from "undici";
import { KubeError, kubeErrorFor } from "./errors.ts";
import type { KubeConfig } from "./kubeconfig.ts";
import { pathOf as typePathOf, stripObject, type KubeObject, type ObjectList, type ResourceType } from "./types.ts";
import { identityCodec, type WireCodec } from "./wire-codec.ts";

export interface ListOptions {
  namespace?: string | undefined;
  labelSelector?: string | undefined;
  limit?: number | undefined;
  continue?: string | undefined;
  signal?: AbortSignal | undefined;
}

export interface DeleteOptions {
  /** Refuse the delete unless the object still has this uid (a re-created object is not deleted by mistake). */
  uid?: string;
  propagationPolicy?: "Background" | "Foreground" | "Orphan";
}

/**
 * The operator's whole Kubernetes surface. Every write that should not clobber a newer object carries the
 * resourceVersion it was computed from (in the body or the merge patch) so the server answers 409.
 */
export interface KubeClient {
  get<T extends KubeObject>(type: ResourceType, namespace: string | undefined, name: string): Promise<T | undefined>;
  list<T extends KubeObject>(type: ResourceType, options?: ListOptions): Promise<ObjectList<T>>;
  create<T extends KubeObject>(type: ResourceType, obj: T): Promise<T>;
  replace<T extends KubeObject>(type: ResourceType, obj: T): Promise<T>;
  /** JSON merge patch (RFC 7386) of the main resource. */
  patch<T extends KubeObject>(
    type: ResourceType,
    namespace: string | undefined,
    name: string,
    patch: object,
  ): Promise<T>;
  /** JSON merge patch of the status subresource. */
  patchStatus<T extends KubeObject>(
    type: ResourceType,
    namespace: string | undefined,
    name: string,
    patch: object,
  ): Promise<T>;
  /**
   * Server-side apply of `obj` under `fieldManager`, forcing ownership of the fields it names (only fields that are
   * the caller's own: a restart annotation). Optional: only the real client has it; callers without it skip the write.
   */
  apply?<T extends KubeObject>(type: ResourceType, obj: T, fieldManager: string): Promise<T>;
  /** Resolves whether or not the object existed. */
  delete(type: ResourceType, namespace: string | undefined, name: string, options?: DeleteOptions): Promise<void>;
}

export interface KubeClientOptions {
  /** Timeout of one request, so a hung apiserver cannot wedge a worker. */
  timeoutMs?: number;
  fieldManager?: string;
  /** Default: the config's shared request pool. */
  dispatcher?: Dispatcher;
  /**
   * false: objects come back whole. By default managedFields and kubectl's last-applied annotation are dropped
   * (the operator never reads them); a client that writes back what it read (a storage migration) needs them.
   */
  strip?: boolean;
  /** The version each type is spoken in on the wire, and the conversion to and from it (default: none). */
  codec?: WireCodec | undefined;
}

type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

/** One request to the apiserver as client-go's rest_client_requests_total counts it: its status, or "<error>" when none came. */
export interface KubeRequestRecord {
  code: string;
  method: string;
  host: string;
}
// Keyed by the config, not a global: two operators in one process (tests) count into their own registries.
const requestObservers = new WeakMap<KubeConfig, (record: KubeRequestRecord) => void>();

/** Every request made through `kubeConfig` from now on (watches and Lease renewals too) is reported to `observer`. */
export function observeKubeRequests(kubeConfig: KubeConfig, observer: (record: KubeRequestRecord) => void): void {
  requestObservers.set(kubeConfig, observer);
}
const HttpMethod = { GET: "GET", POST: "POST", PUT: "PUT", PATCH: "PATCH", DELETE: "DELETE" } as const;

/**
 * One authenticated request through the config's shared connection pool; the caller reads the body (a watch
 * streams it). A 401 drops cached credentials (an expired exec token, a rotated token file) and retries once.
 */
export async function kubeFetch(
  kubeConfig: KubeConfig,
  what: string,
  method: Method,
  path: string,
  query: Record<string, string | undefined>,
  init: { body?: string; contentType?: string; signal?: AbortSignal; watch?: boolean; dispatcher?: Dispatcher } = {},
): Promise<Response> {
  const url = new URL(kubeConfig.server + path);
  for (const [k, v] of Object.entries(query)) if (v !== undefined) url.searchParams.set(k, v);
  const observe = (code: string) => requestObservers.get(kubeConfig)?.({ code, method, host: url.host });
  for (let attempt = 0; ; attempt++) {
    let headers: Record<string, string>;
    try {
      headers = { ...(await kubeConfig.authHeaders()), accept: "application/json" };
    } catch (err) {
      throw new KubeError(`${what}: ${(err as Error).message}`, { code: "config", cause: err });
    }
    if (init.body !== undefined) headers["content-type"] = init.contentType ?? "application/json";
    let response: Response;
    try {
      response = await fetch(url, {
        method,
        headers,
        dispatcher: init.dispatcher ?? (init.watch === true ? kubeConfig.watchDispatcher : kubeConfig.dispatcher),
        ...(init.body === undefined ? {} : { body: init.body }),
        ...(init.signal === undefined ? {} : { signal: init.signal }),
      });
    } catch (err) {
      observe("<error>");
      // The cause of a network error names host and port only; headers never reach it.
      throw new KubeError(`${what}: ${(err as Error).message}`, { code: "network_error", cause: err });
    }
    observe(String(response.status));
    if (response.status === 401 && attempt === 0) {
      await response.body?.cancel().catch(() => undefined);
      kubeConfig.invalidateCredentials();
      continue;
    }
    return response;
  }
}

/** A thin JSON client over undici with our kubeconfig loader's auth and one shared connection pool. */
export function createKubeClient(kubeConfig: KubeConfig, options: KubeClientOptions = {}): KubeClient {
  const timeoutMs = options.timeoutMs ?? 30_000;
  const fieldManager = options.fieldManager ?? "mds-operator";
  const stripOnly = options.strip === false ? <T extends KubeObject>(obj: T) => obj : stripObject;
  const codec = options.codec ?? identityCodec;
  // Every request addresses the type's wire version; every object read is decoded, every body written encoded.
  const pathOf = (type: ResourceType, namespace: string | undefined, name?: string, sub?: string) =>
    typePathOf(codec.onWire(type), namespace, name, sub);
  const read = <T extends KubeObject>(type: ResourceType, obj: T): T => stripOnly(codec.decode(type, obj));
  async function request(
    what: string,
    method: Method,
    path: string,
    query: Record<string, string | undefined>,
    body?: unknown,
    contentType = "application/json",
    signal?: AbortSignal,
  ): Promise<unknown> {
    const timeout = AbortSignal.timeout(timeoutMs);
    const response = await kubeFetch(kubeConfig, what, method, path, query, {
      ...(body === undefined ? {} : { body: JSON.stringify(body), contentType }),
      signal: signal === undefined ? timeout : AbortSignal.any([signal, timeout]),
      ...(options.dispatcher === undefined ? {} : { dispatcher: options.dispatcher }),
    });
    const text = await response.text();
    let parsed: unknown = undefined;
    if (text !== "") {
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
    }
    if (response.status >= 400) throw kubeErrorFor(what, response.status, parsed);
    return parsed;
  }

  const describe = (verb: string, type: ResourceType, namespace: string | undefined, name?: string) =>
    `cannot ${verb} ${type.kind}${name === undefined ? "" : ` "${namespace === undefined ? "" : `${namespace}/`}${name}"`}`;

  return {
    async get<T extends KubeObject>(type: ResourceType, namespace: string | undefined, name: string) {
      try {
        return read(
          type,
          (await request(
            describe("get", type, namespace, name),
            HttpMethod.GET,
            pathOf(type, namespace, name),
            {},
          )) as T,
        );
      } catch (err) {
        if (err instanceof KubeError && err.status === 404) return undefined;
        throw err;
      }
    },
    async list<T extends KubeObject>(type: ResourceType, o: ListOptions = {}) {
      const list = (await request(
        describe("list", type, o.namespace),
        HttpMethod.GET,
        pathOf(type, o.namespace),
        {
          labelSelector: o.labelSelector,
          limit: o.limit === undefined ? undefined : String(o.limit),
          continue: o.continue,
        },
        undefined,
        undefined,
        o.signal,
      )) as ObjectList<T>;
      list.items = (list.items ?? []).map((item) => read(type, item));
      list.metadata = list.metadata ?? {};
      return list;
    },
    async create<T extends KubeObject>(type: ResourceType, obj: T) {
      const ns = obj.metadata.namespace;
      return read(
        type,
        (await request(
          describe("create", type, ns, obj.metadata.name),
          HttpMethod.POST,
          pathOf(type, ns),
          { fieldManager },
          codec.encode(type, obj),
        )) as T,
      );
    },
    async replace<T extends KubeObject>(type: ResourceType, obj: T) {
      const ns = obj.metadata.namespace;
      const name = obj.metadata.name;
      return read(
        type,
        (await request(
          describe("update", type, ns, name),
          HttpMethod.PUT,
          pathOf(type, ns, name),
          { fieldManager },
          codec.encode(type, obj),
        )) as T,
      );
    },
    async patch<T extends KubeObject>(type: ResourceType, namespace: string | undefined, name: string, patch: object) {
      return read(
        type,
        (await request(
          describe("patch", type, namespace, name),
          HttpMethod.PATCH,
          pathOf(type, namespace, name),
          { fieldManager },
          codec.encode(type, patch),
          "application/merge-patch+json",
        )) as T,
      );
    },
    async patchStatus<T extends KubeObject>(
      type: ResourceType,
      namespace: string | undefined,
      name: string,
      patch: object,
    ) {
      return read(
        type,
        (await request(
          describe("update status of", type, namespace, name),
          HttpMethod.PATCH,
          pathOf(type, namespace, name, "status"),
          { fieldManager },
          codec.encode(type, patch),
          "application/merge-patch+json",
        )) as T,
      );
    },
    async apply<T extends KubeObject>(type: ResourceType, obj: T, manager: string) {
      const ns = obj.metadata.namespace;
      const name = obj.metadata.name;
      return read(
        type,
        (await request(
          describe("apply", type, ns, name),
          HttpMethod.PATCH,
          pathOf(type, ns, name),
          { fieldManager: manager, force: "true" },
          codec.encode(type, obj),
          "application/apply-patch+yaml",
        )) as T,
      );
    },
    async delete(type: ResourceType, namespace: string | undefined, name: string, o: DeleteOptions = {}) {
      const body: Record<string, unknown> = { kind: "DeleteOptions", apiVersion: "v1" };
      if (o.uid !== undefined) body["preconditions"] = { uid: o.uid };
      if (o.propagationPolicy !== undefined) body["propagationPolicy"] = o.propagationPolicy;
      try {
        await request(
          describe("delete", type, namespace, name),
          HttpMethod.DELETE,
          pathOf(type, namespace, name),
          {},
          body,
        );
      } catch (err) {
        if (err instanceof KubeError && err.status === 404) return;
        throw err;
      }
    },
  };
}
