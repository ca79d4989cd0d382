// The named points where a test may simulate a crash (OperatorOptions.crashPoint; off in production). Each sits
// between two writes whose order the crash-safety argument depends on. A point's name is `<prefix>:<point>`: the
// managed loop and the Secret component name theirs with the kind in lower case (`controllerCrashPoints`); a kind's
// own code names its own (declared in its folder). src/resources/index.ts lists them all (`crashPoints()`).

/**
 * A crash point as data: its name, the two writes it sits between, and what a restarted operator must do there.
 * docs/crash-points.md is generated from these (`npm run docs:reference`).
 */
export interface CrashPoint {
  name: string;
  /** "the first write → the second": what is done and what is not yet when the process dies here. */
  between: string;
  /** What the next process must do to finish without a duplicate or a loss. */
  restart: string;
}

type Point = Omit<CrashPoint, "name"> & { point: string };

/** The points the managed loop and the Secret component pass, by the step that passes them. */
const managedCrashPoints = {
  create: [
    {
      point: "after-create",
      between: "the create answered (credentials in hand) → the Secret written",
      restart: "find the object by `logicalId`; replay the creation or mint a connection and revoke the lost one",
    },
    {
      point: "after-secret",
      between: "the Secret written → the id annotation and status",
      restart: "adopt; the Secret is already usable",
    },
  ],
  update: [
    {
      point: "after-update",
      between: "the remote update answered → status",
      restart: "observe it up to date and write status",
    },
  ],
  secret: [
    {
      point: "after-recover",
      between: "credentials replayed or minted for a rebuilt Secret → the Secret written",
      restart: "recover again (same key: the same connection)",
    },
    {
      point: "before-revoke",
      between: "the rebuilt Secret written → the connection whose password was lost revoked",
      restart: "revoke it (status still names it)",
    },
  ],
  rotate: [
    {
      point: "after-rotate-mint",
      between: "a rotation's connection minted (`status.rotation.pending` recorded) → the Secret written",
      restart: "mint again under the same name and key (replayed), or find the earlier mint by name and revoke it",
    },
    {
      point: "after-rotate-secret",
      between: "the rotated Secret written → status names the new connection and the retiring one",
      restart: "finish the rotation: the old connection retires (never revoked at once as lost)",
    },
    {
      point: "after-rotate-restart",
      between:
        "consumers Restart: the restart annotation applied to the Secret's workloads → status names the retiring connection",
      restart: "finish the rotation; applying the annotation again changes nothing (same hash), so nothing rolls twice",
    },
    {
      point: "before-retire",
      between:
        "a retiring connection's grace period over (and, with consumers Restart or Wait, its consumers moved) → it is revoked",
      restart: "revoke it",
    },
  ],
  delete: [
    {
      point: "after-delete",
      between: "the remote object deleted (or the login revoked) → the Secret deleted",
      restart: "see it gone, delete the Secret",
    },
    {
      point: "before-finalizer-drop",
      between: "the Secret deleted or released → the finalizer removed",
      restart: "repeat both (idempotent), then drop the finalizer",
    },
  ],
} as const satisfies Record<string, readonly Point[]>;
export type ManagedStep = keyof typeof managedCrashPoints;
export const managedSteps = Object.keys(managedCrashPoints) as ManagedStep[];

/** The prefix of the loop's points for a kind: its name in lower case. */
const crashPointPrefixOf = (kind: string) => kind.toLowerCase();

/** The managed loop's points of a kind that passes `steps`. */
export function managedCrashPointsOf(kind: string, steps: readonly ManagedStep[]): CrashPoint[] {
  return steps.flatMap((step) =>
    managedCrashPoints[step].map(({ point, ...text }) => ({ name: `${crashPointPrefixOf(kind)}:${point}`, ...text })),
  );
}
