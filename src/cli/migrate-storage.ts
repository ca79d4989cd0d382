import { parseArgs } from "node:util";
import { createKubeClient } from "../kube/client.ts";
import { commandKubeConfig } from "./kube-config.ts";
import { migrateStorage } from "../migrate/storage.ts";
import { mdsCrdNames } from "../webhook/crd-ca-bundle.ts";

export const migrateStorageHelp = `usage: mds migrate-storage [options]

After an upgrade that changed the storage version of the mds.dev CRDs (0.2.0: v1alpha1 -> v1beta1), writes every
object of the six kinds back unchanged so the API server stores it in the storage version, then sets each CRD's
status.storedVersions to the storage version alone (what kube-storage-version-migrator does). Run it once the new
CRDs and \`mds webhook\` are installed; safe to interrupt and run again. Needs list and update on the six kinds in
every namespace and get and update on customresourcedefinitions/status (a cluster admin has them).

  --per-second <n>     objects written per second at most (default: 20)
  --kubeconfig <file>  kubeconfig to reach the API server (default: KUBECONFIG, else in-cluster, else ~/.kube/config)
  --context <name>     kubeconfig context`;

export async function runMigrateStorage(argv: string[]): Promise<number> {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        "per-second": { type: "string" },
        kubeconfig: { type: "string" },
        context: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
    }));
  } catch (err) {
    console.error(`mds migrate-storage: ${err instanceof Error ? err.message : String(err)}\n\n${migrateStorageHelp}`);
    return 2;
  }
  if (values["help"]) {
    console.log(migrateStorageHelp);
    return 0;
  }
  const str = (k: string) => (typeof values[k] === "string" ? values[k] : undefined);
  const perSecond = Number(str("per-second") ?? "20");
  if (!Number.isFinite(perSecond) || perSecond <= 0) {
    console.error(`mds migrate-storage: --per-second ${str("per-second")} is not a positive number`);
    return 2;
  }
  const kubeConfig = commandKubeConfig({ kubeconfig: str("kubeconfig"), context: str("context") }, (message) =>
    console.error(`mds migrate-storage: ${message}`),
  );
  if (kubeConfig === undefined) return 2;
  const kube = createKubeClient(kubeConfig, { timeoutMs: 60_000, fieldManager: "mds-migrate-storage", strip: false });
  try {
    await migrateStorage({ kube, crdNames: mdsCrdNames, perSecond, log: (line) => console.log(line) });
    console.log("mds migrate-storage: done");
    return 0;
  } catch (err) {
    // KubeError messages name the object and the status, never request headers.
    console.error(`mds migrate-storage: ${err instanceof Error ? err.message : String(err)}; run it again to resume`);
    return 1;
  } finally {
    await kubeConfig.close();
  }
}
