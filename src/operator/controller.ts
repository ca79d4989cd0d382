import type { Logger } from "pino";
import { z } from "zod";
import { parseLeniently } from "./lenient.ts";
import type { KubeClient } from "../kube/client.ts";
import type { KubeObject, ResourceType, Secret } from "../kube/types.ts";
import {
  chooseCredentials,
  type ApiContext,
  type CredentialPool,
  type CredentialUse,
  type OperatorCredentials,
  type RemoteState,
  type SecretKeyRef,
} from "./credentials.ts";
import { loopStallingReasons } from "./conditions.ts";
import { managedCrashPointsOf, managedSteps, type CrashPoint, type ManagedStep } from "./crash-points.ts";
import { TerminalError } from "./errors.ts";
import type { EventRecorder } from "./events.ts";
import type { ManagedHandler, ManagedObject } from "./managed-handler.ts";
import { reconcileManaged } from "./managed-reconciler.ts";
import {
  reconcileOneShot,
  reconcileRecurring,
  type OneShotDeps,
  type OneShotHandler,
  type RecurringHandler,
} from "./one-shot-reconciler.ts";
import type { Outcome } from "./outcome.ts";
import type { StatusObject } from "./status.ts";
import type { AcceptedIds } from "./accepted.ts";
import type { ConsumerIndex } from "./secret/consumer-index.ts";

// A controller is what the operator runs for one kind (src/resources/index.ts lists them): the kind's address, its
// reconciler (the managed loop or the one-shot loop, driving the kind's handler), which other kinds' changes wake
// its objects, and what it declares for tests and docs (crash points, stalling reasons). The operator knows no kind
// by name: it iterates controllers.

export interface ObjectCache {
  get(namespace: string | undefined, name: string): KubeObject | undefined;
  list(namespace?: string): KubeObject[];
  /**
   * The objects that name remote id `id` (spec.externalId, status.id or the id annotation), from the operator's
   * index: no scan of every object. A cache without the index (a test's) leaves it out.
   */
  withRemoteId?(id: string): KubeObject[];
}

/**
 * What a controller's code may use: shared clients, the caches of every registered kind, the operator's settings.
 * `R`: what each credential gives (its client and mirror), whose methods only the kinds know.
 */
export interface ControllerContext<R extends RemoteState = RemoteState> {
  kube: KubeClient;
  pool: CredentialPool<R>;
  /** The operator's own credentials Secret and the namespaces that may fall back to it. */
  defaultCredentials: OperatorCredentials;
  /** For logicalId "k8s:<instanceId>:<namespace>/<name>" and connection names. */
  instanceId: string;
  /**
   * The remote ids the kinds' own loops accepted (accepted.ts): what a reference to another resource's remote object
   * may act on, never its status alone.
   */
  accepted: AcceptedIds;
  /** The informer cache of a registered kind, by kind name (references between kinds). */
  cache(kind: string): ObjectCache;
  /** The labelled Secret cache (the operator's own Secrets). */
  secrets: { get(namespace: string | undefined, name: string): Secret | undefined; list(namespace?: string): Secret[] };
  events: EventRecorder;
  logger: Logger;
  pollIntervals: { fastMs: number; slowMs: number };
  crashPoint: (name: string) => void | Promise<void>;
  /** Who uses which Secret, when the operator follows a rotation's consumers (--rotation-consumers). */
  consumers?: ConsumerIndex | undefined;
}

export interface Controller<R extends RemoteState = RemoteState> {
  kind: string;
  type: ResourceType;
  /** Every crash point its objects may pass (named `<prefix>:<point>`); MDS_CRASH_POINT accepts these names. */
  crashPoints: readonly CrashPoint[];
  /** The reasons after which its objects are Stalled (the loops' own and the kind's). */
  stallingReasons: readonly string[];
  /** Workers of this kind's queue, given the operator's --concurrency (default: that). */
  workers?: ((concurrency: number) => number) | undefined;
  /** Changes of another kind's objects that wake objects of this kind: the keys (`namespace/name`) to enqueue. */
  wakeOn?: { kind: string; keys(changed: KubeObject, own: ObjectCache): string[] }[] | undefined;
  /** Builds the reconciler of one key. */
  reconciler(ctx: ControllerContext<R>): (key: string) => Promise<Outcome>;
  /** The kind's per-object gauges: declared here, registered by metrics.ts, their samples read at scrape time. */
  objectGauges?: ObjectGauges | undefined;
}

/**
 * Per-object gauges over the objects of kind `of`. What a sample needs of an object (`view`) is taken from the
 * informer's events and kept by key (`namespace/name`; `undefined`: no series for it), so a scrape unpacks no cached
 * object: listing 10,000 cached Databases on each scrape stalled the operator's event loop for seconds.
 */
interface ObjectGauges<V = unknown> {
  gauges: ObjectGauge[];
  of: string;
  view(obj: KubeObject): V | undefined;
  samples(views: ReadonlyMap<string, V>, cache: ControllerContext["cache"], now: number): ObjectGaugeSample[];
}

/** A gauge with one series per object: an alert must name the object (the exception to "no names in labels"). */
export interface ObjectGauge {
  name: string;
  help: string;
  /** The labels that carry the object's namespace and name (not `namespace`: a ServiceMonitor sets that one). */
  labels: [namespace: string, name: string];
}

/** One series of a per-object gauge: labelled by the object's namespace and name. */
export interface ObjectGaugeSample {
  metric: string;
  namespace: string;
  name: string;
  value: number;
}

/** What a kind declares besides its handler; the loop's own crash points and stalling reasons are added to it. */
interface ControllerBase {
  kind: string;
  type: ResourceType;
  workers?: Controller["workers"];
  wakeOn?: Controller["wakeOn"];
  /** The kind's own stalling reasons (conditions.ts has the loops'). */
  stallingReasons?: readonly string[];
  /** The kind's own crash points (`<prefix>:<point>`), besides the loop's. */
  crashPoints?: readonly CrashPoint[];
  objectGauges?: Controller["objectGauges"];
}

/**
 * A kind with a remote object, reconciled by the managed loop. `steps`: the loop's steps its objects pass (default:
 * all); each brings its crash points (crash-points.ts), e.g. a kind without a remote update leaves out "update".
 */
export function managedController<T extends ManagedObject, R extends RemoteState>(
  base: ControllerBase & { steps?: readonly ManagedStep[] },
  build: (ctx: ControllerContext<R>) => ManagedHandler<T>,
): Controller<R> {
  const { steps = managedSteps, ...rest } = base;
  const controller = declared(rest, [...managedCrashPointsOf(base.kind, steps), ...(base.crashPoints ?? [])]);
  return {
    ...controller,
    reconciler(ctx) {
      const handler = build(ctx);
      const deps = {
        ...ctx,
        stalling: new Set(controller.stallingReasons),
        objects: ctx.cache(base.kind),
        logger: ctx.logger.child({ controller: `managed/${base.kind.toLowerCase()}` }),
        guardCredentials: (ref: SecretKeyRef) => ctx.pool.guard(ref),
      };
      return (key) => reconcileManaged(deps, handler, key);
    },
  };
}

/** A one-shot operation, reconciled by the one-shot loop; `crashPoints`: the ones its handler's steps pass. */
export function oneShotController<T extends StatusObject, R extends RemoteState>(
  base: ControllerBase,
  build: (ctx: ControllerContext<R>) => OneShotHandler<T>,
): Controller<R> {
  return stepLoopController(base, "once", build, reconcileOneShot);
}

/**
 * A recurring operation (a schedule): the one-shot loop's live read, steps, status and errors, with no final phase,
 * so it never finishes; each step says when the next one is due (its requeue).
 */
export function recurringController<T extends StatusObject, R extends RemoteState>(
  base: ControllerBase,
  build: (ctx: ControllerContext<R>) => RecurringHandler<T>,
): Controller<R> {
  return stepLoopController(base, "recurring", build, reconcileRecurring);
}

/** The controller of a kind on the one-shot loop (`once`) or its recurring variant. */
function stepLoopController<R extends RemoteState, H>(
  base: ControllerBase,
  loop: "once" | "recurring",
  build: (ctx: ControllerContext<R>) => H,
  reconcile: (deps: OneShotDeps, handler: H, key: string) => Promise<Outcome>,
): Controller<R> {
  const { crashPoints = [], ...rest } = base;
  const controller = declared(rest, crashPoints);
  return {
    ...controller,
    reconciler(ctx) {
      const handler = build(ctx);
      const deps = {
        ...ctx,
        stalling: new Set(controller.stallingReasons),
        logger: ctx.logger.child({ controller: `${loop}/${base.kind.toLowerCase()}` }),
      };
      return (key) => reconcile(deps, handler, key);
    },
  };
}

function declared(base: ControllerBase, crashPoints: readonly CrashPoint[]): Omit<Controller, "reconciler"> {
  return {
    ...base,
    crashPoints,
    stallingReasons: [...new Set([...loopStallingReasons, ...(base.stallingReasons ?? [])])],
  };
}

/**
 * Parses a raw object with the kind's schema, its status leniently (lenient.ts: what a newer version wrote there is
 * ignored, not an error); any other failure is terminal, with what to fix.
 */
export function parseOrTerminal<T>(schema: z.ZodType<T>, kind: string, raw: KubeObject): T {
  const result = schema.safeParse(raw);
  if (result.success) return result.data;
  const lenient = parseLeniently(schema, raw, result.error.issues);
  if (lenient !== undefined) return lenient;
  throw new TerminalError(
    "InvalidSpec",
    `invalid ${kind} "${raw.metadata.name}": ${z.prettifyError(result.error).replace(/\n/g, "; ")}`,
  );
}

/**
 * The API client of a resource in `namespace` with `spec.credentials` (or none): the token chooseCredentials picks,
 * and which one it is (the loops write it to status.credentials).
 */
export async function resolveCredentials<R extends RemoteState>(
  ctx: Pick<ControllerContext<R>, "pool" | "defaultCredentials">,
  namespace: string,
  spec: { credentials?: { secretRef: { name: string; key?: string | undefined } } | undefined },
): Promise<ApiContext<R> & { use: CredentialUse }> {
  const use = await chooseCredentials(ctx.pool, ctx.defaultCredentials, namespace, spec.credentials?.secretRef);
  return { ...(await ctx.pool.resolve(use.ref)), use };
}
