import type { Logger } from "pino";
import { z } from "zod";
import type { KubeClient } from "../kube/client.ts";
import type { KubeObject, ResourceType, Secret } from "../kube/types.ts";
import {
  chooseCredentials,
  type ApiContext,
  type CredentialPool,
  type CredentialUse,
  type OperatorCredentials,
  type SecretKeyRef,
} from "./credentials.ts";
import { TerminalError } from "./errors.ts";
import type { EventRecorder } from "./events.ts";
import type { ManagedKind, ManagedObject } from "./managed-kind.ts";
import { reconcileManaged } from "./managed-reconciler.ts";
import { reconcileOneShot, type OneShotKind } from "./one-shot-reconciler.ts";
import type { Outcome } from "./outcome.ts";
import type { StatusObject } from "./status.ts";

// A kind is a registration the operator iterates (src/resources/index.ts lists them): its address, its reconciler
// (the managed loop or the one-shot loop, with the kind's thin code), and which other kinds' changes wake its
// objects. The operator knows no kind by name.

export interface ObjectCache {
  get(namespace: string | undefined, name: string): KubeObject | undefined;
  list(namespace?: string): KubeObject[];
  /**
   * The objects that name remote id `id` (spec.externalId, status.id or the id annotation), from the operator's
   * index: no scan of every object. A cache without the index (a test's) leaves it out.
   */
  withRemoteId?(id: string): KubeObject[];
}

/** What a kind's code may use: shared clients, the caches of every registered kind, the operator's settings. */
export interface KindContext {
  kube: KubeClient;
  pool: CredentialPool;
  /** The operator's own credentials Secret and the namespaces that may fall back to it. */
  defaultCredentials: OperatorCredentials;
  /** For logicalId "k8s:<instanceId>:<namespace>/<name>" and connection names. */
  instanceId: string;
  /** The informer cache of a registered kind, by kind name (references between kinds). */
  cache(kind: string): ObjectCache;
  /** The labelled Secret cache (the operator's own Secrets). */
  secrets: { get(namespace: string | undefined, name: string): Secret | undefined; list(namespace?: string): Secret[] };
  events: EventRecorder;
  logger: Logger;
  pollIntervals: { fastMs: number; slowMs: number };
  crashPoint: (name: string) => void | Promise<void>;
}

export interface KindRegistration {
  kind: string;
  type: ResourceType;
  /** Workers of this kind's queue, given the operator's --concurrency (default: that). */
  workers?(concurrency: number): number;
  /** Changes of another kind's objects that wake objects of this kind: the keys (`namespace/name`) to enqueue. */
  wakeOn?: { kind: string; keys(changed: KubeObject, own: ObjectCache): string[] }[];
  /** Builds the reconciler of one key. */
  reconciler(ctx: KindContext): (key: string) => Promise<Outcome>;
  /** Per-object gauge samples, read from the caches at scrape time (their metrics are declared in metrics.ts). */
  objectGauges?(cache: KindContext["cache"], now: number): ObjectGaugeSample[];
}

/** One series of a per-object gauge: labelled by the object's namespace and name. */
export interface ObjectGaugeSample {
  metric: string;
  namespace: string;
  name: string;
  value: number;
}

/** A kind with a remote object, reconciled by the managed loop. */
export function managedKind<T extends ManagedObject>(
  base: Omit<KindRegistration, "reconciler">,
  build: (ctx: KindContext) => ManagedKind<T>,
): KindRegistration {
  return {
    ...base,
    reconciler(ctx) {
      const kind = build(ctx);
      const deps = {
        ...ctx,
        objects: ctx.cache(base.kind),
        logger: ctx.logger.child({ controller: `managed/${base.kind.toLowerCase()}` }),
        guardCredentials: (ref: SecretKeyRef) => ctx.pool.guard(ref),
      };
      return (key) => reconcileManaged(deps, kind, key);
    },
  };
}

/** A one-shot operation, reconciled by the one-shot loop. */
export function oneShotKind<T extends StatusObject>(
  base: Omit<KindRegistration, "reconciler">,
  build: (ctx: KindContext) => OneShotKind<T>,
): KindRegistration {
  return {
    ...base,
    reconciler(ctx) {
      const kind = build(ctx);
      const deps = { ...ctx, logger: ctx.logger.child({ controller: `once/${base.kind.toLowerCase()}` }) };
      return (key) => reconcileOneShot(deps, kind, key);
    },
  };
}

/** Parses a raw object with the kind's schema; a failure is terminal, with what to fix. */
export function parseOrTerminal<T>(schema: z.ZodType<T>, kind: string, raw: KubeObject): T {
  const result = schema.safeParse(raw);
  if (result.success) return result.data;
  throw new TerminalError(
    "InvalidSpec",
    `invalid ${kind} "${raw.metadata.name}": ${z.prettifyError(result.error).replace(/\n/g, "; ")}`,
  );
}

/**
 * The API client of a resource in `namespace` with `spec.credentials` (or none): the token chooseCredentials picks,
 * and which one it is (the loops write it to status.credentials).
 */
export async function resolveCredentials(
  ctx: Pick<KindContext, "pool" | "defaultCredentials">,
  namespace: string,
  spec: { credentials?: { secretRef: { name: string; key?: string | undefined } } | undefined },
): Promise<ApiContext & { use: CredentialUse }> {
  const use = await chooseCredentials(ctx.pool, ctx.defaultCredentials, namespace, spec.credentials?.secretRef);
  return { ...(await ctx.pool.resolve(use.ref)), use };
}
