// The named points where a test may simulate a crash (OperatorOptions.crashPoint; off in production). Each sits
// between two writes whose order the crash-safety argument depends on. A point's name is `<prefix>:<point>`: the
// managed loop and the Secret component name theirs with the kind in lower case (`controllerCrashPoints`); a kind's
// own code names its own (declared in its folder). src/resources/index.ts lists them all (`crashPoints()`).

/** The points the managed loop and the Secret component pass, by the step that passes them. */
const managedCrashPoints = {
  create: [
    "after-create", // POST answered; Secret not yet written
    "after-secret", // Secret written; external-id annotation and status not yet
  ],
  update: [
    "after-update", // remote update answered; status not yet
  ],
  secret: [
    "after-recover", // Secret rebuild: credentials replayed or a connection minted; Secret not yet written
    "before-revoke", // rebuilt Secret written; the connection whose password was lost not yet revoked
  ],
  rotate: [
    "after-rotate-mint", // a new connection minted (status.rotation.pending recorded); Secret not yet written
    "after-rotate-secret", // rotated Secret written; status does not name the new connection nor the retiring one
    "after-rotate-restart", // consumers Restart: restart annotation applied to the Secret's workloads; status not yet
    "before-retire", // a retiring connection's grace period ended; not yet revoked
  ],
  delete: [
    "after-delete", // remote DELETE done (deletionPolicy Delete); Secret not yet deleted
    "before-finalizer-drop", // Secret deleted or released; finalizer not yet removed
  ],
} as const;
export type ManagedStep = keyof typeof managedCrashPoints;
export const managedSteps = Object.keys(managedCrashPoints) as ManagedStep[];

/** The prefix of the loop's points for a kind: its name in lower case. */
const crashPointPrefixOf = (kind: string) => kind.toLowerCase();

/** The managed loop's points of a kind that passes `steps`. */
export function managedCrashPointsOf(kind: string, steps: readonly ManagedStep[]): string[] {
  return steps.flatMap((step) => managedCrashPoints[step].map((point) => `${crashPointPrefixOf(kind)}:${point}`));
}
