// What the kubelet would give the operator's process from a rendered Deployment: its args and environment (envFrom
// ConfigMaps, the downward API, $(VAR) expansion). The deploy tests run the operator in the test process with them,
// as devkube runs no pods.
interface Container {
  args?: string[];
  env?: { name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }[];
  envFrom?: { configMapRef?: { name: string } }[];
}

/** The operator container's args and environment as the kubelet would give them to the process. */
export function containerOptions(rendered: { kind: string; metadata: { name: string } }[], namespace: string, podName: string): { args: string[]; env: Record<string, string> } {
  const deployment = rendered.find((o) => o.kind === "Deployment" && o.metadata.name === "mds-operator") as unknown as { spec: { template: { spec: { containers: Container[] } } } } | undefined;
  const container = deployment?.spec.template.spec.containers[0];
  if (container === undefined) throw new Error("the install renders no mds-operator Deployment");
  const env: Record<string, string> = {};
  for (const from of container.envFrom ?? []) {
    const configMap = rendered.find((o) => o.kind === "ConfigMap" && o.metadata.name === from.configMapRef?.name) as unknown as { data?: Record<string, string> } | undefined;
    if (configMap === undefined) throw new Error(`envFrom names a missing ConfigMap ${from.configMapRef?.name}`);
    Object.assign(env, configMap.data);
  }
  const fields: Record<string, string> = { "metadata.namespace": namespace, "metadata.name": podName };
  // $(VAR) refers to variables defined earlier in the list, as the kubelet expands them.
  const expand = (text: string) => text.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (whole, name: string) => env[name] ?? whole);
  for (const e of container.env ?? []) {
    const fieldPath = e.valueFrom?.fieldRef?.fieldPath;
    if (fieldPath !== undefined) env[e.name] = fields[fieldPath] ?? "";
    else if (e.value !== undefined) env[e.name] = expand(e.value);
  }
  return { args: (container.args ?? []).map(expand), env };
}

