import type { KubeClient } from "../../kube/client.ts";
import { isKubeNotFound, KubeAlreadyExistsError } from "../../kube/errors.ts";
import type { KubeObject } from "../../kube/types.ts";
import { errorCode, isApiNotFound } from "../../operator/api.ts";
import { isoSeconds } from "../../operator/time.ts";
import { DatabaseBackupType } from "../database-backup/schema.ts";
import { apiVersion } from "../group.ts";
import type { MdsApi } from "../remote/remote-api.ts";
import { Refused } from "../remote/operations.ts";
import type { BackupSchedule } from "./schema.ts";

// A schedule's calls: the slot's DatabaseBackup created in Kubernetes (it takes the backup), and retention's deletes
// of a backup at the service and of its DatabaseBackup. Thin and idempotent (already there, already gone: done),
// data back, a refusal as `Refused`. Which slot, and what may be pruned, is the controller's.

export type ScheduleObject = BackupSchedule & { metadata: { name: string; namespace?: string | undefined } };

/** The annotation on a slot's DatabaseBackup: the slot it was created for. */
export const scheduledAtAnnotation = "mds.dev/scheduled-at";
/** The label on a slot's DatabaseBackup (`kubectl get databasebackups -l mds.dev/backup-schedule=<name>`). */
const scheduleLabel = "mds.dev/backup-schedule";

const slotMinutes = (slot: number) => Math.floor(slot / 60_000);

/** The DatabaseBackup of a slot: named and keyed by the slot, so its creation and its POST are idempotent. */
export function slotBackupName(schedule: string, slot: number): string {
  return `${schedule}-${slotMinutes(slot)}`;
}

/** The idempotencyKey of a slot's DatabaseBackup: one backup per schedule (uid) and slot. */
export const slotKey = (uid: string, slot: number) => `${uid}/${slotMinutes(slot)}`;

/** The DatabaseBackup the schedule creates for `slot`: controlled by it, named and keyed by the slot. */
function slotBackup(schedule: ScheduleObject, slot: number): KubeObject {
  const name = schedule.metadata.name;
  return {
    apiVersion,
    kind: "DatabaseBackup",
    metadata: {
      name: slotBackupName(name, slot),
      namespace: schedule.metadata.namespace ?? "default",
      labels: { [scheduleLabel]: name },
      annotations: { [scheduledAtAnnotation]: isoSeconds(slot) },
      ownerReferences: [
        {
          apiVersion,
          kind: "BackupSchedule",
          name,
          uid: schedule.metadata.uid ?? "",
          controller: true,
          blockOwnerDeletion: false,
        },
      ],
    },
    spec: {
      databaseRef: { name: schedule.spec.databaseRef.name },
      idempotencyKey: slotKey(schedule.metadata.uid ?? "", slot),
    },
  };
}

/**
 * Creates the slot's DatabaseBackup: `created`, or, when the name is taken (a restart, a lost answer, or someone
 * else's resource), the object that holds it.
 */
export async function createSlotBackup(
  kube: KubeClient,
  schedule: ScheduleObject,
  slot: number,
): Promise<{ created: true } | { created: false; existing: KubeObject | undefined }> {
  const backup = slotBackup(schedule, slot);
  try {
    await kube.create(DatabaseBackupType, backup);
    return { created: true };
  } catch (err) {
    if (!(err instanceof KubeAlreadyExistsError)) throw err;
    const { namespace, name } = backup.metadata;
    return { created: false, existing: await kube.get<KubeObject>(DatabaseBackupType, namespace, name) };
  }
}

/**
 * Deletes a backup at the service through the schedule's own database (and token): a 404 there means gone, or never
 * this database's, and is done. A 409 (a running or daily backup the service keeps) is `Refused("conflict")`.
 */
export async function deleteServiceBackup(api: MdsApi, databaseId: string, backupId: string): Promise<void> {
  try {
    await api.deleteBackup(databaseId, backupId);
  } catch (err) {
    if (errorCode(err) === "conflict") throw new Refused("conflict", (err as Error).message);
    if (!isApiNotFound(err)) throw err;
  }
}

/** Deletes a DatabaseBackup (this incarnation only, by uid); one already gone is done. */
export async function deleteSlotBackup(kube: KubeClient, child: KubeObject): Promise<void> {
  try {
    await kube.delete(DatabaseBackupType, child.metadata.namespace, child.metadata.name, {
      ...(child.metadata.uid === undefined ? {} : { uid: child.metadata.uid }),
    });
  } catch (err) {
    if (!isKubeNotFound(err)) throw err;
  }
}
