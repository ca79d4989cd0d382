import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { startDevkube, type Devkube, type DevkubeOptions } from "@mds/devkube";
import { runKubectl, type KubectlResult } from "../support/kubectl.ts";

export { eventually } from "../support/eventually.ts";

export interface Harness {
  devkube: Devkube;
  dir: string;
  kubectl(args: string[], input?: string): Promise<KubectlResult>;
  /** kubectl that must succeed; returns stdout. */
  ok(args: string[], input?: string): Promise<string>;
  file(name: string, content: string): Promise<string>;
  close(): Promise<void>;
}

export async function startHarness(options: Partial<DevkubeOptions> = {}): Promise<Harness> {
  const dir = await mkdtemp(path.join(tmpdir(), "devkube-test-"));
  const devkube = await startDevkube({ dir: path.join(dir, "server"), ...options });
  const cacheDir = path.join(dir, "kube-cache");
  const kubectl = (args: string[], input?: string) =>
    runKubectl(devkube.kubeconfigPath, args, { cacheDir, ...(input !== undefined ? { input } : {}) });
  return {
    devkube,
    dir,
    kubectl,
    async ok(args, input) {
      const r = await kubectl(args, input);
      if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")} failed (${r.code}): ${r.stderr}${r.stdout}`);
      return r.stdout;
    },
    async file(name, content) {
      const p = path.join(dir, name);
      await writeFile(p, content);
      return p;
    },
    async close() {
      await devkube.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export const WIDGET_CRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
    shortNames: [wg]
    categories: [all, examples]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
    additionalPrinterColumns:
    - name: Size
      type: integer
      jsonPath: .spec.size
    - name: Ready
      type: string
      jsonPath: .status.conditions[?(@.type=="Ready")].status
    - name: Color
      type: string
      priority: 1
      jsonPath: .spec.color
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
    schema:
      openAPIV3Schema:
        type: object
        description: A Widget is a test resource.
        properties:
          spec:
            type: object
            description: Desired state of the widget.
            x-kubernetes-validations:
            - rule: "!has(self.size) || self.size <= 100"
              message: size must be at most 100
            properties:
              size:
                type: integer
                default: 1
                description: How big the widget is.
              color:
                type: string
                description: The widget's color.
          status:
            type: object
            properties:
              conditions:
                type: array
                items:
                  type: object
                  properties:
                    type: { type: string }
                    status: { type: string }
                    observedGeneration: { type: integer }
                    reason: { type: string }
                    message: { type: string }
                    lastTransitionTime: { type: string }
`;

export function widget(
  name: string,
  spec: Record<string, unknown>,
  labels: Record<string, string> = {},
  extraMeta = "",
): string {
  const lines = [`apiVersion: example.com/v1`, `kind: Widget`, `metadata:`, `  name: ${name}`, `  namespace: default`];
  if (Object.keys(labels).length > 0) {
    lines.push("  labels:");
    for (const [k, v] of Object.entries(labels)) lines.push(`    ${k}: ${JSON.stringify(v)}`);
  }
  if (extraMeta) lines.push(extraMeta);
  lines.push(`spec: ${JSON.stringify(spec)}`);
  return `${lines.join("\n")}\n`;
}
