import type { Controller } from "../../operator/controller.ts";
import type { ReasonDoc } from "../../operator/conditions.ts";
import type { RemoteState } from "../../operator/credentials.ts";
import type { CrdDefinition } from "./crd.ts";
import type { KindSettings } from "./settings.ts";

/**
 * One kind, as its folder's index.ts exports it: everything the rest of the repository needs to know about it. `R`:
 * what its controller calls (for mds's kinds the service's MdsApi and mirror, ../mds-kind.ts); `S`: the settings its
 * controller takes from `mds operator` flags (none: the default).
 */
export interface KindModule<R extends RemoteState, S = Record<string, never>> {
  /** Its CRD: names, schema, printer columns (`npm run crds`). */
  definition: CrdDefinition;
  /**
   * What the operator may do to its objects, as RBAC verbs on its resource (every kind is also listed and watched by
   * its informer, and its status subresource patched), with why: `npm run registry` writes the mds.dev rules of the
   * ClusterRole, the single-namespace Role and the chart from these.
   */
  access: { verbs: readonly ResourceVerb[]; why: string };
  /** Whether `spec.deletionProtection: true` makes the API server refuse its deletion (the admission policy's resources). */
  deletionProtection: boolean;
  /**
   * The remote calls its code makes (besides the Secret component's, which every kind with a Secret shares) and,
   * among them, the writes: a replica that is not the leader refuses those (src/operator/credentials.ts).
   */
  api: { reads: readonly ApiMethod<R>[]; writes: readonly ApiMethod<R>[] };
  /**
   * The condition reasons only its controller writes, as the user meets them (the loop's and the shared ones are
   * src/operator/conditions.ts's and ../conditions.ts's): docs/conditions.md and docs/troubleshooting.md's table.
   */
  reasons: Readonly<Record<string, ReasonDoc>>;
  /**
   * The data keys of the Secrets it writes whose values are secrets (a password, a URL that carries one): the
   * operator's logger removes them wherever they appear, and the tests plant and look for their values everywhere.
   */
  secretKeys: readonly string[];
  /**
   * The settings its controller takes, each a flag and an environment variable of `mds operator`
   * (src/cli/operator-config.ts parses them, docs/cli.md lists them). Unset ones are absent from `controller`'s.
   */
  settings: KindSettings<S>;
  /** What the operator runs for it: the loop with the kind's handler, its crash points and stalling reasons. */
  controller(settings: Partial<S>): Controller<R>;
  /**
   * Its Argo CD health check (Lua): `conditionsHealthScript` for a kind whose objects say Ready/Synced/Stalled, or
   * one of its own beside it. `npm run argocd-cm` copies it to deploy/argocd/resource_customizations/mds.dev/<Kind>/.
   */
  healthScript: URL;
}

/** The verbs a kind may declare beyond list and watch, which every kind's informer needs. */
export type ResourceVerb = "get" | "patch" | "create" | "delete";

/** A method name of the remote's API client. */
type ApiMethod<R extends RemoteState> = Extract<keyof R["api"], string>;

/** The health check of every kind whose Ready, Synced, Reconciling and Stalled conditions say it all. */
export const conditionsHealthScript = new URL("./health.lua", import.meta.url);

/** The health check of the one-shot kinds (a restore, a backup): their phase says it all. */
export const oneShotHealthScript = new URL("./one-shot-health.lua", import.meta.url);
