import type { ReasonDoc } from "../../operator/conditions.ts";

/** The condition reasons only a Database's controller writes (its project, its clone source, its branch, its deletion). */
export const databaseReasons = {
  WaitingForProject: {
    condition: "Ready=False",
    argo: "Progressing",
    means:
      "A Database being deleted is its project's default database; the public API deletes it only with its project.",
    fix: "Delete the Project (resource with `deletionPolicy: Delete`, or the remote project).",
  },
  ProjectNotReady: {
    condition: "Synced=False",
    argo: "Progressing",
    means: "The Database's `projectRef` names a Project that is missing or not Ready.",
    fix: "Check the name; `kubectl get mdsproject`.",
  },
  SourceNotReady: {
    condition: "Synced=False, Ready=False",
    argo: "Progressing",
    means:
      "A clone's source (`spec.source` type `database`) is missing, has no remote id yet or is not `ready` at the service. Nothing is created until it is; retried (at least every 30 s, and when the source Database changes).",
    fix: "Check `source.databaseRef.name`; `kubectl get mdsdb <source>`; wait for it.",
  },
  NoProductionBranch: {
    condition: "Synced=False",
    argo: "Progressing",
    means:
      "A Database on a preview branch (`spec.branch`) waits until its project has a branch: the service makes a project's first branch its production branch for good.",
    fix: "Apply the long-lived Database with `spec.branch.role: Production` first ([preview-environments.md](preview-environments.md)).",
  },
  BranchRoleMismatch: {
    condition: "Ready=False, Stalled",
    argo: "Degraded",
    means: "The branch `spec.branch` names is a production branch where the spec says preview, or the reverse.",
    fix: "Fix `spec.branch.role`, or name another branch.",
  },
} as const satisfies Record<string, ReasonDoc>;
