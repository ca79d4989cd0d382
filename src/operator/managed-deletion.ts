import { externalIdAnnotation } from "./annotations.ts";
import { ReconcileError, TerminalError, WaitingError } from "./errors.ts";
import { remoteIdOf } from "./identity.ts";
import type { ExternalClient, ManagedObject } from "./managed-handler.ts";
import { secretNameOf, type LoopRun } from "./managed-run.ts";
import { done, requeueAfter, type Outcome } from "./outcome.ts";

// The managed loop's ways out (docs/design.md#the-loop and docs/design.md#deletion): a resource being deleted, and one whose grant was withdrawn.

/**
 * Deleting: under deletionPolicy Delete the remote object goes first (unless spared), then the Secret; under Retain
 * the Secret is released. The finalizer goes last.
 */
export async function reconcileDeletion<T extends ManagedObject>(run: LoopRun<T>): Promise<Outcome> {
  const fins = run.obj.metadata.finalizers ?? [];
  if (!fins.includes(run.finalizer)) return done();
  const policy = run.obj.spec.deletionPolicy ?? "Retain";
  const secretName =
    run.obj.status?.secretName ?? (run.obj.spec.connectionSecret !== undefined ? secretNameOf(run.obj) : undefined);
  const spared = policy === "Delete" ? await sparedFromDeletion(run) : undefined;
  if (spared !== undefined) {
    const message = `Kept the remote ${run.noun} despite deletionPolicy Delete: ${spared}`;
    run.deps.events.record(run.obj, "Normal", "Retained", message);
  }
  if (policy === "Delete" && spared === undefined) {
    const result = await (await connectToDelete(run)).delete(run.obj);
    if (!result.done) {
      const ready = { type: "Ready", status: "False", reason: result.reason, message: result.message } as const;
      await run.writeStatus({}, ready, run.synced);
      return requeueAfter(run.deps.pollIntervals.fastMs * 2);
    }
    await run.crashPoint("after-delete");
    if (secretName !== undefined) await run.secrets.delete(secretName, run.handler.secretDatabaseIds?.(run.obj) ?? []);
    const id = remoteIdOf(run.obj);
    run.deps.events.record(run.obj, "Normal", "Deleted", `Deleted the remote ${run.noun}${id ? ` "${id}"` : ""}`);
  } else if (secretName !== undefined) {
    await run.secrets.release(secretName);
  }
  await run.crashPoint("before-finalizer-drop");
  await run.deps.kube.patch(run.handler.type, run.obj.metadata.namespace, run.obj.metadata.name, {
    metadata: {
      resourceVersion: run.obj.metadata.resourceVersion,
      finalizers: fins.filter((f) => f !== run.finalizer),
    },
  });
  run.log.info({ policy }, `Finalized ${run.handler.kind}`);
  return done();
}

/** Deleting the remote object needs the token: without it, say how to finish. */
async function connectToDelete<T extends ManagedObject>(run: LoopRun<T>): Promise<ExternalClient<T>> {
  return run.connect().catch((err: unknown) => {
    if (!(err instanceof ReconcileError) || err.reason !== "CredentialsMissing") throw err;
    const { type, obj } = { type: run.handler.type, obj: run.obj };
    throw new WaitingError(
      "CredentialsMissing",
      `${err.message}. To finish deleting: restore that Secret, or keep the remote ${run.noun} with ` +
        `kubectl patch ${type.plural}.${type.group} ${obj.metadata.name} -n ${obj.metadata.namespace ?? "default"} --type=merge -p '{"spec":{"deletionPolicy":"Retain"}}'`,
    );
  });
}

/** Why deletionPolicy Delete must not delete the remote object: it was only observed, never adopted, or is another's. */
async function sparedFromDeletion<T extends ManagedObject>(run: LoopRun<T>): Promise<string | undefined> {
  if (run.observeOnly) return "managementPolicy is ObserveOnly";
  const externalId = run.obj.spec.externalId;
  if (externalId !== undefined && run.obj.status?.id !== externalId)
    return `the adoption of "${externalId}" was never accepted`;
  const manager = await run.handler.managerOtherThan?.(run.obj);
  if (manager !== undefined) return `${run.handler.kind} "${manager}" manages it`;
  return undefined;
}

/** Revokes and removes what a withdrawn grant let this resource hold; a new grant starts it afresh (a new mint). */
export async function withdraw<T extends ManagedObject>(
  run: LoopRun<T>,
  external: ExternalClient<T>,
  why: { reason: string; message: string },
): Promise<never> {
  if (remoteIdOf(run.obj) !== undefined || run.obj.status?.secretName !== undefined) {
    const result = await external.delete(run.obj);
    if (!result.done) throw new ReconcileError(result.reason, result.message);
    if (run.obj.status?.secretName !== undefined)
      await run.secrets.delete(run.obj.status.secretName, run.handler.secretDatabaseIds?.(run.obj) ?? []);
    await run.patch({ metadata: { annotations: { [externalIdAnnotation]: null } } });
    const gone = {
      id: undefined,
      connection: undefined,
      secretName: undefined,
      binding: undefined,
      rotation: undefined,
      endpoints: undefined,
    };
    await run.writeStatus(gone, { type: "Ready", status: "False", reason: why.reason, message: why.message });
    const message = `Revoked the ${run.noun}'s credentials and deleted its Secret: ${why.message}`;
    run.deps.events.record(run.obj, "Warning", why.reason, message);
  }
  throw new TerminalError(why.reason, why.message);
}
