import { z } from "zod";
import type { KubeObject } from "../../kube/types.ts";
import type { CredentialPool, SecretKeyRef } from "../../operator/credentials.ts";
import { ReconcileError, TerminalError } from "../../operator/errors.ts";
import type { ManagedKind } from "../../operator/managed-reconciler.ts";
import { annotations } from "../../operator/connection-secret.ts";
import { DatabaseType } from "../types.ts";
import { createDatabaseExternal, recordedDatabaseId, type DatabaseObject } from "./external.ts";
import { Database } from "./schema.ts";

export interface KindDeps {
  pool: CredentialPool;
  defaultCredentials: { secretNamespace: string; secretName: string; key: string };
  instanceId: string;
  /** Cached objects of the other kinds, for references. */
  projects: { get(namespace: string | undefined, name: string): KubeObject | undefined };
  databases: { get(namespace: string | undefined, name: string): KubeObject | undefined };
}

export function credentialsRefOf(
  obj: { metadata: { namespace?: string | undefined }; spec: { credentials?: { secretRef: { name: string; key: string } } | undefined } },
  deps: Pick<KindDeps, "defaultCredentials">,
): SecretKeyRef {
  const ref = obj.spec.credentials?.secretRef;
  // `key` defaults to "token" (the CRD defaults it; a raw object read elsewhere may predate that).
  if (ref !== undefined) return { namespace: obj.metadata.namespace ?? "default", name: ref.name, key: (ref.key as string | undefined) ?? "token" };
  const d = deps.defaultCredentials;
  return { namespace: d.secretNamespace, name: d.secretName, key: d.key };
}

/** The remote id recorded on a cached object (status.id, else the external-id annotation written right after create). */
export function remoteIdOf(obj: KubeObject | undefined): string | undefined {
  if (obj === undefined) return undefined;
  const spec = obj["spec"] as { externalId?: string } | undefined;
  const status = obj["status"] as { id?: string } | undefined;
  return spec?.externalId ?? status?.id ?? obj.metadata.annotations?.[annotations.externalId];
}

export function parseOrTerminal<T>(schema: z.ZodType<T>, kind: string, raw: KubeObject): T {
  const result = schema.safeParse(raw);
  if (result.success) return result.data;
  throw new TerminalError("InvalidSpec", `invalid ${kind} "${raw.metadata.name}": ${z.prettifyError(result.error).replace(/\n/g, "; ")}`);
}

export function databaseKind(deps: KindDeps): ManagedKind<DatabaseObject> {
  return {
    kind: "Database",
    type: DatabaseType,
    parse: (raw) => parseOrTerminal(Database, "Database", raw) as DatabaseObject,
    async connect(obj) {
      const ns = obj.metadata.namespace ?? "default";
      let projectId = obj.spec.projectId;
      if (projectId === undefined && obj.spec.projectRef !== undefined) {
        const project = deps.projects.get(ns, obj.spec.projectRef.name);
        projectId = remoteIdOf(project) ?? obj.status?.projectId;
        if (projectId === undefined) {
          throw new ReconcileError(
            "ProjectNotReady",
            project === undefined ? `project "${obj.spec.projectRef.name}" not found in namespace "${ns}"` : `project "${obj.spec.projectRef.name}" has no remote id yet`,
          );
        }
      }
      if (projectId === undefined) throw new TerminalError("InvalidSpec", "set exactly one of projectRef.name or projectId");
      const ctx = await deps.pool.resolve(credentialsRefOf(obj, deps));
      if (recordedDatabaseId(obj) !== undefined) await ctx.mirror.ready();
      return createDatabaseExternal({
        api: ctx.api,
        mirror: ctx.mirror,
        instanceId: deps.instanceId,
        projectId,
        databaseIdOf: (namespace, name) => remoteIdOf(deps.databases.get(namespace, name)),
      });
    },
  };
}
