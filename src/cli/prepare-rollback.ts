import { parseArgs } from "node:util";
import { createKubeClient, type KubeClient } from "../kube/client.ts";
import { isKubeConflict } from "../kube/errors.ts";
import { commandKubeConfig } from "./kube-config.ts";
import type { KubeObject, ResourceType } from "../kube/types.ts";
import { group, version } from "../resources/group.ts";
import { kindModules } from "../resources/index.ts";

// Before an operator is rolled back to a release that reads status strictly (0.1.0 and every commit before it): such
// an operator marks a resource Stalled InvalidSpec, and manages it no more, when its status holds a condition type
// it does not know. This command removes those conditions from the status of every mds resource, and nothing else:
// the older operator rewrites its own conditions at its first reconcile. From 0.2.0 on an operator ignores what it
// does not know (src/operator/lenient.ts), so a rollback to 0.2.0 or later needs none of this.

export const prepareRollbackHelp = `usage: mds prepare-rollback (--to <version> | --keep-conditions <types>) [options]

Before rolling the operator back to a release older than 0.2.0, removes from the status of every mds resource the
conditions whose type that release does not know (it would mark the resource Stalled InvalidSpec and manage it no
more). Nothing else changes: no spec, no Secret, nothing at the service. Run it after stopping the newer operator
(scale its Deployment to 0) and before starting the older one; docs/upgrade.md says when.

  --to <version>             the release rolled back to: ${Object.keys(conditionTypesOf()).join(", ")}
  --keep-conditions <types>  the condition types it knows, comma-separated (a commit before 0.1.0: Ready,Synced,Stalled)
  --namespace <ns>           only this namespace (default: every namespace)
  --dry-run                  change nothing; print what would change
  --kubeconfig <path>        kubeconfig file (default: KUBECONFIG, else in-cluster, else ~/.kube/config)
  --context <name>           kubeconfig context (default: its current context)`;

/** The condition types each release that reads status strictly knows. */
function conditionTypesOf(): Record<string, string[]> {
  return { "0.1.0": ["Ready", "Synced", "Reconciling", "Stalled", "Expired"] };
}

interface Options {
  keep: Set<string>;
  namespace: string | undefined;
  dryRun: boolean;
}

function parse(argv: string[]): Options & { kubeconfig?: string | undefined; context?: string | undefined } {
  const { values } = parseArgs({
    args: argv,
    options: {
      to: { type: "string" },
      "keep-conditions": { type: "string" },
      namespace: { type: "string" },
      "dry-run": { type: "boolean", default: false },
      kubeconfig: { type: "string" },
      context: { type: "string" },
    },
    strict: true,
  });
  const known = conditionTypesOf();
  let keep: string[] | undefined;
  if (values.to !== undefined) {
    keep = known[values.to];
    if (keep === undefined)
      throw new UsageError(
        `--to ${values.to}: not a release that needs this (${Object.keys(known).join(", ")}); from 0.2.0 on an operator reads what it does not know, so nothing needs preparing`,
      );
  }
  if (values["keep-conditions"] !== undefined) {
    if (keep !== undefined) throw new UsageError("--to and --keep-conditions exclude each other");
    keep = values["keep-conditions"].split(",").map((t) => t.trim());
    if (keep.some((t) => !/^[A-Za-z][A-Za-z0-9]*$/.test(t)))
      throw new UsageError(`--keep-conditions "${values["keep-conditions"]}": condition types, comma-separated`);
  }
  if (keep === undefined) throw new UsageError("name the release rolled back to: --to <version> or --keep-conditions");
  return {
    keep: new Set(keep),
    namespace: values.namespace,
    dryRun: values["dry-run"],
    kubeconfig: values.kubeconfig,
    context: values.context,
  };
}

class UsageError extends Error {}

type StatusObject = KubeObject & { status?: { conditions?: { type?: unknown }[] } };

const kindTypes = (): ResourceType[] =>
  kindModules.map((k) => ({ group, version, plural: k.definition.plural, kind: k.definition.kind, namespaced: true }));

/** Removes the unknown conditions of one object; retried on a conflict with a fresh read. Returns what it removed. */
async function prepareOne(kube: KubeClient, type: ResourceType, obj: StatusObject, o: Options): Promise<string[]> {
  for (let current: StatusObject | undefined = obj; current !== undefined;) {
    const conditions = current.status?.conditions ?? [];
    const unknown = conditions.filter((c) => !o.keep.has(String(c.type)));
    if (unknown.length === 0 || o.dryRun) return unknown.map((c) => String(c.type));
    try {
      await kube.patchStatus(type, current.metadata.namespace, current.metadata.name, {
        metadata: { resourceVersion: current.metadata.resourceVersion },
        status: { conditions: conditions.filter((c) => o.keep.has(String(c.type))) },
      });
      return unknown.map((c) => String(c.type));
    } catch (err) {
      if (!isKubeConflict(err)) throw err;
      current = await kube.get<StatusObject>(type, current.metadata.namespace, current.metadata.name);
    }
  }
  return [];
}

/** Prepares every mds resource; returns one line per resource changed (or, with dryRun, that would be). */
export async function prepareRollback(kube: KubeClient, o: Options): Promise<string[]> {
  const lines: string[] = [];
  for (const type of kindTypes()) {
    const list = await kube.list<StatusObject>(type, o.namespace === undefined ? {} : { namespace: o.namespace });
    for (const obj of list.items) {
      const removed = await prepareOne(kube, type, obj, o);
      if (removed.length > 0)
        lines.push(
          `${type.plural}.${group} ${obj.metadata.namespace}/${obj.metadata.name}: ${o.dryRun ? "would remove" : "removed"} ${removed.join(", ")}`,
        );
    }
  }
  return lines;
}

export async function runPrepareRollback(argv: string[]): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    console.log(prepareRollbackHelp);
    return 0;
  }
  let options: ReturnType<typeof parse>;
  try {
    options = parse(argv);
  } catch (err) {
    console.error(`mds prepare-rollback: ${(err as Error).message}\n\n${prepareRollbackHelp}`);
    return 2;
  }
  const kubeConfig = commandKubeConfig(options, (message) => console.error(`mds prepare-rollback: ${message}`));
  if (kubeConfig === undefined) return 2;
  const lines = await prepareRollback(createKubeClient(kubeConfig), options);
  for (const line of lines) console.log(line);
  console.log(
    `mds prepare-rollback: ${lines.length} resource(s) ${options.dryRun ? "would change" : "changed"}; keeping conditions ${[...options.keep].join(", ")}`,
  );
  return 0;
}
