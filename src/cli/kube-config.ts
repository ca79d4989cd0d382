import { KubeConfigError, loadKubeConfig, type KubeConfig } from "../kube/kubeconfig.ts";

/**
 * The kubeconfig of a command a person or a Job runs (mds webhook, migrate-storage, prepare-rollback), chosen as
 * kubectl does: `--kubeconfig`, else `KUBECONFIG`, else the pod's service account inside a pod, else ~/.kube/config.
 * A configuration that cannot be loaded is reported through `report` (one line, no secret: the loader's messages name
 * files and contexts only) and gives undefined, so the command exits 2 instead of printing a stack.
 */
export function commandKubeConfig(
  flags: { kubeconfig?: string | undefined; context?: string | undefined },
  report: (message: string) => void,
  env: NodeJS.ProcessEnv = process.env,
): KubeConfig | undefined {
  const kubeconfig = flags.kubeconfig ?? env["KUBECONFIG"];
  try {
    return loadKubeConfig({
      kubeconfig,
      context: flags.context,
      inCluster: env["KUBERNETES_SERVICE_HOST"] !== undefined && kubeconfig === undefined,
      env,
    });
  } catch (err) {
    if (!(err instanceof KubeConfigError)) throw err;
    report(err.message);
    return undefined;
  }
}
