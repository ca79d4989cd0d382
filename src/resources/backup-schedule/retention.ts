import { timingSafeEqual } from "node:crypto";
import type { KubeObject } from "../../kube/types.ts";
import { backupSealMessage } from "../remote/backups.ts";
import { scheduledAtAnnotation, slotBackupName, slotKey, type ScheduleObject } from "./operation.ts";

// What retention may touch: the DatabaseBackups this schedule created (owned, both ways), of them the ones past
// `keep` (toPrune), and of their backups only one whose record its own loop sealed (sealed). Decisions only: the
// calls are operation.ts's, their order the controller's.

export type Child = KubeObject & {
  spec?: { idempotencyKey?: string } | undefined;
  status?: { phase?: string; backupId?: string; databaseId?: string; backupSeal?: string } | undefined;
};

/**
 * The DatabaseBackups this schedule created, checked both ways: each names the schedule as its controller (an
 * ownerReference with the schedule's uid, in its namespace), and is what the schedule creates for its slot (the
 * name and idempotencyKey the schedule derives from its own name and uid and that slot). Anyone may create a
 * DatabaseBackup with such an ownerReference; one made otherwise is not the schedule's.
 */
export function ownedBackups(all: KubeObject[], schedule: ScheduleObject): Child[] {
  const ns = schedule.metadata.namespace;
  const uid = schedule.metadata.uid;
  if (uid === undefined) return [];
  return (all as Child[]).filter((b) => {
    const slot = Date.parse(b.metadata.annotations?.[scheduledAtAnnotation] ?? "");
    return (
      b.metadata.namespace === ns &&
      (b.metadata.ownerReferences ?? []).some(
        (r) => r.uid === uid && r.kind === "BackupSchedule" && r.controller === true,
      ) &&
      !Number.isNaN(slot) &&
      b.metadata.name === slotBackupName(schedule.metadata.name, slot) &&
      b.spec?.idempotencyKey === slotKey(uid, slot)
    );
  });
}

/** Whether `child`'s record of its backup is the one its own loop sealed from the service's answer. */
export function sealed(child: Child, databaseId: string, backupId: string, seal: (message: string) => string): boolean {
  const uid = child.metadata.uid;
  const recorded = child.status?.backupSeal;
  if (uid === undefined || recorded === undefined) return false;
  const expected = Buffer.from(seal(backupSealMessage(uid, databaseId, backupId)));
  const given = Buffer.from(recorded);
  return expected.length === given.length && timingSafeEqual(expected, given);
}

export const slotOf = (b: KubeObject) => {
  const t = Date.parse(b.metadata.annotations?.[scheduledAtAnnotation] ?? "");
  return Number.isNaN(t) ? Date.parse(b.metadata.creationTimestamp ?? "") || 0 : t;
};

/**
 * What retention removes: past the newest `keep` Succeeded ones, every older Succeeded one, and every Failed one
 * older than the newest Succeeded one (superseded). Pending and Running ones are never removed.
 */
export function toPrune(owned: Child[], keep: number): { prune: Child[]; kept: number } {
  const newestFirst = [...owned].sort((a, b) => slotOf(b) - slotOf(a));
  const succeeded = newestFirst.filter((b) => b.status?.phase === "Succeeded");
  const newestOk = succeeded[0] === undefined ? undefined : slotOf(succeeded[0]);
  const prune = [
    ...succeeded.slice(keep),
    ...newestFirst.filter((b) => b.status?.phase === "Failed" && newestOk !== undefined && slotOf(b) < newestOk),
  ];
  return { prune, kept: Math.min(succeeded.length, keep) };
}
