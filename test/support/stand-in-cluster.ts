// A devkube that stands in for a real cluster with mds's CRDs installed, for running the whole end-to-end suite in
// real-cluster mode without one (docs/e2e.md): the CRDs of crds/ applied, the conversion webhook they name running
// behind its Service (as deploy/ runs it), workload controllers as kube-controller-manager runs them, and no
// kubelet (a cluster whose pods the tests may not run: they play the kubelet where they need one).
//
//   node test/support/stand-in-cluster.ts --dir /tmp/stand-in     # prints the kubeconfig path once ready
//   MDS_E2E_KUBECONFIG=/tmp/stand-in/kubeconfig npx vitest run test/e2e
//
// Ctrl-C (or SIGTERM) stops the webhook and devkube.
import { mkdirSync } from "node:fs";
import { parseArgs } from "node:util";
import { startDevkubeWithCrds } from "./devkube-with-crds.ts";

const { values } = parseArgs({ options: { dir: { type: "string" } } });
if (values.dir === undefined) {
  console.error("usage: node test/support/stand-in-cluster.ts --dir DIR");
  process.exit(2);
}
mkdirSync(values.dir, { recursive: true });
const cluster = await startDevkubeWithCrds({
  dir: values.dir,
  port: 0,
  pods: { kubelet: false },
});
console.log(`stand-in cluster ready: MDS_E2E_KUBECONFIG=${cluster.devkube.kubeconfigPath}`);
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    void cluster.stop().then(() => process.exit(0));
  });
}
