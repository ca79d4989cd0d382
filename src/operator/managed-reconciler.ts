import { isKubeNotFound } from "../kube/errors.ts";
import { jsonEqual } from "./conditions.ts";
import { TerminalError, classifyError, messageOf } from "./errors.ts";
import { remoteIdOf } from "./identity.ts";
import { reconcileDeletion, withdraw } from "./managed-deletion.ts";
import { expire, untilExpiry } from "./managed-expiry.ts";
import type { ExternalClient, ManagedHandler, ManagedObject, Observation } from "./managed-handler.ts";
import { LoopRun, type LoopDeps } from "./managed-run.ts";
import { done, failed, requeueAfter, type Outcome } from "./outcome.ts";
import { publishedStatus } from "./secret/publisher.ts";
import type { SecretTarget } from "./secret/types.ts";
import { readyCondition, reportError, splitKey, synced, type ConditionUpdate } from "./status.ts";
import { externalIdAnnotation, pausedAnnotation, reconcileRequestedAnnotation } from "./annotations.ts";

export { type LoopDeps } from "./managed-run.ts";

// The one generic loop (docs/design.md#the-loop) for every kind with a remote object:
//   get → deleting? (observe → delete per policy → release Secret → drop finalizer) → paused? → expired?
//       → ensure finalizer → observe → create if absent → update if drifted → publish Secret → status
// With managementPolicy ObserveOnly it stops after observe: status and drift, no write to the service, no Secret.
// A kind supplies only a ManagedHandler (parse, connect) whose ExternalClient returns data and throws typed errors.
// Only this loop logs, emits Events and writes status; the Secret is the connection-Secret component's.

export async function reconcileManaged<T extends ManagedObject>(
  deps: LoopDeps,
  handler: ManagedHandler<T>,
  key: string,
): Promise<Outcome> {
  const [namespace, name] = splitKey(key);
  const raw = deps.objects.get(namespace, name);
  if (raw === undefined) return done();
  const log = deps.logger.child({ namespace, name, generation: raw.metadata.generation });
  const now = deps.now ?? (() => new Date());
  let run: LoopRun<T> | undefined;
  try {
    run = new LoopRun(deps, handler, handler.parse(raw), log, now);
    return await reconcile(run);
  } catch (err) {
    if (isKubeNotFound(err) && (await goneMeanwhile(deps, handler, raw))) {
      // Deleted while this reconcile ran (an expiry, the finalizer dropped before the cache saw it): nothing to report.
      log.debug({ err }, `${handler.kind} is gone`);
      deps.accepted?.forget(handler.kind, raw);
      return done();
    }
    // A refusal (AdoptionConflict, AdoptionRefused, an invalid spec): nothing may act through this resource.
    if (err instanceof TerminalError) deps.accepted?.forget(handler.kind, raw);
    await reportError(deps, handler.type, run?.obj ?? raw, err, log, now());
    return failed(err);
  } finally {
    // Whatever came of it (accepted, refused, an outage): a referrer that waited quietly for this loop now reports.
    deps.accepted?.looked(handler.kind, raw);
  }
}

/** Whether the object this reconcile started from no longer exists at the API server (or another took its name). */
async function goneMeanwhile<T extends ManagedObject>(
  deps: LoopDeps,
  handler: ManagedHandler<T>,
  raw: { metadata: { namespace?: string | undefined; name: string; uid?: string | undefined } },
): Promise<boolean> {
  const live = await deps.kube.get(handler.type, raw.metadata.namespace, raw.metadata.name).catch(() => null);
  return live === undefined || (live !== null && live.metadata.uid !== raw.metadata.uid);
}

async function reconcile<T extends ManagedObject>(run: LoopRun<T>): Promise<Outcome> {
  if (run.obj.metadata.deletionTimestamp !== undefined) {
    run.unaccept();
    return reconcileDeletion(run);
  }
  run.requested = run.obj.metadata.annotations?.[reconcileRequestedAnnotation];
  if (run.obj.metadata.annotations?.[pausedAnnotation] === "true") {
    const message = "Reconciliation is paused by the mds.dev/paused annotation";
    await run.writeStatus({}, { type: "Synced", status: "False", reason: "ReconcilePaused", message });
    return done();
  }
  const expiry = run.handler.expiry?.(run.obj, run.now());
  if (expiry !== undefined && (await expire(run, expiry))) return done();
  return untilExpiry(expiry, run.now, () => {
    const slowMs = run.pollIntervalMs();
    return run.observeOnly ? observeOnly(run, slowMs) : manage(run, slowMs);
  });
}

/** Full: create if absent, update if drifted, keep the Secret current and rotate it, write status. */
async function manage<T extends ManagedObject>(run: LoopRun<T>, slowMs: number): Promise<Outcome> {
  await ensureFinalizer(run);
  const external = await run.connect();
  if (external.withdrawn !== undefined) return withdraw(run, external, external.withdrawn);
  let observed = await external.observe(run.obj);
  if (!observed.exists) {
    const recorded = run.obj.spec.externalId !== undefined || remoteIdOf(run.obj) !== undefined;
    return recorded ? run.notFound(slowMs) : create(run, external);
  }
  // Read-only so far: a second claimant is refused before it updates, mints or publishes anything.
  const manager = await run.handler.managerOtherThan?.(run.obj);
  if (manager !== undefined) throw run.adoptionConflict(manager);
  if (observed.drift.length > 0) {
    await external.update(run.obj);
    await run.crashPoint("after-update");
    run.deps.events.record(run.obj, "Normal", "Updated", `Updated the remote ${run.noun} to match the spec`);
    observed = await external.observe(run.obj);
  }
  const published =
    observed.secret === undefined
      ? undefined
      : await ensureSecret(run, external, observed.secret, observed.status, observed.ready.ok);
  await run.writeStatus({ ...observed.status, ...published?.fields }, readyOf(observed.ready), run.synced);
  run.accept();
  const poll = run.nextPoll(observed, slowMs);
  // A retiring connection's revocation or the next scheduled rotation may come before the next poll.
  return requeueAfter(Math.min(poll, published?.wakeInMs ?? poll));
}

const readyOf = (ready: Observation["ready"]): ConditionUpdate =>
  ready.ok ? readyCondition(true, "Available", "") : readyCondition(false, ready.reason, ready.message);

/**
 * ObserveOnly: mirror the remote object and report drift; never create, update, delete or mint, and no finalizer
 * (nothing remote is deleted, so nothing has to wait). Switching to Full adopts through the normal path.
 */
async function observeOnly<T extends ManagedObject>(run: LoopRun<T>, slowMs: number): Promise<Outcome> {
  const external = await run.connect();
  if (remoteIdOf(run.obj) === undefined) {
    throw new TerminalError(
      "InvalidSpec",
      `managementPolicy ObserveOnly needs spec.externalId: the remote ${run.noun} to observe`,
    );
  }
  const observed = await external.observe(run.obj);
  if (!observed.exists) return run.notFound(slowMs);
  const drift = observed.drift.length === 0 ? undefined : observed.drift;
  if (drift !== undefined && !jsonEqual(drift, run.obj.status?.["drift"])) {
    const what = drift.map((d) => `${d.field}: spec "${d.desired}", remote "${d.actual}"`).join("; ");
    const message = `The remote ${run.noun} differs from the spec (ObserveOnly: not changed): ${what}`;
    run.deps.events.record(run.obj, "Warning", "Drifted", message);
  }
  // No Secret is written here, so a remote object without a usable connection is still available to observe.
  const ready =
    observed.ready.ok || observed.ready.reason !== "RemoteIncomplete" ? observed.ready : { ok: true as const };
  const message =
    "managementPolicy is ObserveOnly: the remote object is mirrored, never changed; no connection Secret is written";
  await run.writeStatus(
    { ...observed.status, drift },
    readyOf(ready),
    run.synced === synced ? { type: "Synced", status: "True", reason: "ObserveOnly", message } : run.synced,
  );
  run.accept();
  return requeueAfter(run.nextPoll(observed, slowMs));
}

/** Makes the Secret current and rotates it when due; returns the status fields that name it. */
async function ensureSecret<T extends ManagedObject>(
  run: LoopRun<T>,
  external: ExternalClient<T>,
  target: SecretTarget,
  observedStatus: Record<string, unknown>,
  ready: boolean,
) {
  const owner = external.connections;
  if (owner === undefined) return undefined;
  let published: string;
  try {
    published = await run.secrets.ensureCurrent(owner, target);
  } catch (err) {
    // Ready means "an app can connect with the Secret": not while it cannot be made current.
    if (!classifyError(err).conflict) {
      const message = `The connection Secret "${target.name}" is missing or out of date and could not be rebuilt yet: ${messageOf(err)}`;
      await run.writeStatus(observedStatus, { type: "Ready", status: "False", reason: "SecretOutOfDate", message });
    }
    throw err;
  }
  // Rotations wait for a ready database (a provisioning one may not have its logins yet). A failed rotation
  // leaves the current credentials working: Synced=False says why, Ready stays.
  if (!ready) return { fields: publishedStatus(target, published), wakeInMs: undefined };
  return run.secrets.rotate(owner, target, published, run.obj.spec.connectionSecret, (fields) =>
    run.writeStatus(fields),
  );
}

/** Creates (or finds by logicalId) the remote object; the Secret is written before anything records the id. */
async function create<T extends ManagedObject>(run: LoopRun<T>, external: ExternalClient<T>): Promise<Outcome> {
  const creation = await external.create(run.obj);
  await run.crashPoint("after-create");
  let secretStatus: Record<string, unknown> = {};
  const owner = external.connections;
  if (owner !== undefined && creation.credentials !== undefined && creation.secret !== undefined) {
    secretStatus = publishedStatus(
      creation.secret,
      await run.secrets.publishCreated(creation.secret, creation.credentials),
    );
    await run.crashPoint("after-secret");
    // Only now: revoked before the write, a crash between the two would leave the Secret naming a revoked login.
    for (const id of creation.leaked ?? []) await owner.revoke(run.obj, creation.secret.databaseId, id);
  }
  await run.patch({ metadata: { annotations: { [externalIdAnnotation]: creation.id } } });
  const verb = creation.adopted ? "Adopted" : "Created";
  run.log.info({ id: creation.id, adopted: creation.adopted }, `${verb} ${run.handler.kind}`);
  const what = `${creation.adopted ? "Adopted the existing" : "Created the"} remote ${run.noun} "${creation.id}"`;
  run.deps.events.record(run.obj, "Normal", verb, what);
  const waiting = `Waiting for the remote ${run.noun} "${creation.id}"`;
  await run.writeStatus(
    { ...creation.status, id: creation.id, ...secretStatus },
    { type: "Ready", status: "False", reason: "Creating", message: waiting },
    run.synced,
  );
  run.accept();
  // The watch event of these writes brings the key back with a fresh object; an immediate requeue would read
  // the cache before it has them and repeat the lookup.
  return requeueAfter(run.deps.pollIntervals.fastMs);
}

async function ensureFinalizer<T extends ManagedObject>(run: LoopRun<T>) {
  const fins = run.obj.metadata.finalizers ?? [];
  if (fins.includes(run.finalizer)) return;
  await run.patch({
    metadata: { resourceVersion: run.obj.metadata.resourceVersion, finalizers: [...fins, run.finalizer] },
  });
}
