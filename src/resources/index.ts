import type { Controller, ObjectGauge } from "../operator/controller.ts";
import { loopReasons, type ReasonDoc } from "../operator/conditions.ts";
import type { CrashPoint } from "../operator/crash-points.ts";
import { sharedReasons } from "./conditions.ts";
import { backupScheduleModule } from "./backup-schedule/index.ts";
import { connectionModule } from "./connection/index.ts";
import { databaseBackupModule } from "./database-backup/index.ts";
import { databaseRestoreModule } from "./database-restore/index.ts";
import { databaseModule } from "./database/index.ts";
import type { KindSettingValues, MdsKindModule } from "./mds-kind.ts";
import type { KindSetting } from "./kit/settings.ts";
import { projectModule } from "./project/index.ts";
import { sharedApiCalls } from "./remote/shared-calls.ts";
import type { MdsRemote } from "./remote/remote-api.ts";

// The registry: every kind, one line each. From here come the CRDs (crd.ts), the operator's controllers and their
// settings (mds operator's flags), the crash points MDS_CRASH_POINT accepts, the condition and stalling reasons, the
// secret keys the logger removes, the writes a non-leader refuses, the RBAC rules and the Argo CD health checks. A
// new kind is its own folder plus one line below (src/resources/README.md, "Adding a kind").
/** A kind of the registry, whatever settings it takes (each module is typed with its own). */
type RegisteredKind = MdsKindModule<Record<string, unknown>>;

export const kindModules: RegisteredKind[] = [
  projectModule,
  databaseModule,
  databaseRestoreModule,
  connectionModule,
  databaseBackupModule,
  backupScheduleModule,
];

/**
 * Every remote call that writes, of the kinds and of what they share: a replica that is not the leader refuses them
 * (the operator's remote, ./mds-remote.ts).
 */
export function apiWrites(kinds: readonly { api: { writes: readonly string[] } }[] = kindModules): string[] {
  return [...new Set([...sharedApiCalls.writes, ...kinds.flatMap((k) => k.api.writes)])];
}

/** Every kind's controller, each given its own settings (`mds operator` parsed them: `parseKindSettings`). */
export function controllers(settings: KindSettingValues = {}): Controller<MdsRemote>[] {
  return kindModules.map((k) => k.controller(settings[k.definition.kind] ?? {}));
}

/** Every data key, of every kind's Secrets, whose value is a secret (its module's `secretKeys`), each once. */
export function secretKeys(kinds: readonly { secretKeys: readonly string[] }[] = kindModules): string[] {
  return [...new Set(kinds.flatMap((k) => k.secretKeys))];
}

/** A setting of one kind: the kind, its key in the kind's settings, and its declaration. */
export interface DeclaredSetting {
  kind: string;
  key: string;
  setting: KindSetting<unknown>;
}

/**
 * Every kind's settings, in registry order (`mds operator` takes each as a flag and a variable; docs/cli.md lists
 * them). A flag or variable declared twice throws: two kinds cannot share one.
 */
export function kindSettings(
  kinds: readonly {
    definition: { kind: string };
    settings: Readonly<Record<string, KindSetting<unknown>>>;
  }[] = kindModules,
): DeclaredSetting[] {
  const declared = kinds.flatMap((k) =>
    Object.entries(k.settings).map(([key, setting]) => ({ kind: k.definition.kind, key, setting })),
  );
  for (const name of ["flag", "env"] as const) {
    const values = declared.map((d) => d.setting[name]);
    const twice = values.find((v, i) => values.indexOf(v) !== i);
    if (twice !== undefined) throw new Error(`two kinds' settings are both ${twice}`);
  }
  return declared;
}

/** Every crash point of every kind, as data (docs/crash-points.md is generated from it), in registry order. */
export function crashPointDeclarations(
  kinds: readonly { controller(settings: object): { crashPoints: readonly CrashPoint[] } }[] = kindModules,
): CrashPoint[] {
  return kinds.flatMap((k) => k.controller({}).crashPoints);
}

/** The name of every crash point (test-only; `MDS_CRASH_POINT` accepts exactly these), in registry order. */
export function crashPoints(): string[] {
  return crashPointDeclarations().map((p) => p.name);
}

/** A condition reason the operator can write, with who declares it: the loops, the service's model, or one kind. */
export interface DeclaredReason extends ReasonDoc {
  reason: string;
  declaredBy: "the loops" | "shared" | (string & {});
}

/**
 * Every condition reason: the loops', the shared ones, then each kind's own in registry order (docs/conditions.md
 * and docs/troubleshooting.md's table are rendered from it). A reason is declared once: a second declaration throws.
 */
export function conditionReasons(
  kinds: readonly { definition: { kind: string }; reasons: Readonly<Record<string, ReasonDoc>> }[] = kindModules,
): DeclaredReason[] {
  const sources: [string, Readonly<Record<string, ReasonDoc>>][] = [
    ["the loops", loopReasons],
    ["shared", sharedReasons],
    ...kinds.map((k): [string, Readonly<Record<string, ReasonDoc>>] => [k.definition.kind, k.reasons]),
  ];
  const seen = new Map<string, string>();
  return sources.flatMap(([declaredBy, reasons]) =>
    Object.entries(reasons).map(([reason, doc]) => {
      const earlier = seen.get(reason);
      if (earlier !== undefined)
        throw new Error(`condition reason ${reason} is declared by ${earlier} and ${declaredBy}`);
      seen.set(reason, declaredBy);
      return { reason, declaredBy, ...doc };
    }),
  );
}

/** Every reason after which some kind's objects are Stalled (the Argo CD health script names the same). */
export function stallingReasons(): string[] {
  return [...new Set(controllers().flatMap((c) => c.stallingReasons))];
}

/** Every kind's per-object gauges (the operator's metrics registry declares them). */
export function objectGauges(): ObjectGauge[] {
  return controllers().flatMap((c) => c.objectGauges?.gauges ?? []);
}
