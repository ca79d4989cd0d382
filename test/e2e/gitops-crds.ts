// Stand-ins for the CRDs of Flux (source.toolkit.fluxcd.io/v1 GitRepository, kustomize.toolkit.fluxcd.io/v1
// Kustomization) and Argo CD (argoproj.io/v1alpha1 Application), so that a server-side dry-run of examples/gitops
// is judged against their documented API (fluxcd.io/flux/components/{source,kustomize}/api/v1,
// argo-cd.readthedocs.io "Application Specification"): the fields the examples use and their neighbours, with
// their types, enums, patterns and required fields; everything else is refused as unknown, as a strict dry-run
// against the real CRDs refuses a typo. Written here from the documentation, not copied from those projects.

import { stringify } from "yaml";

type Schema = Record<string, unknown>;
const str: Schema = { type: "string" };
const bool: Schema = { type: "boolean" };
const duration: Schema = { type: "string", pattern: "^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$" };
const obj = (properties: Record<string, Schema>, required: string[] = []): Schema => ({
  type: "object",
  properties,
  ...(required.length > 0 ? { required } : {}),
});
const arrayOf = (items: Schema): Schema => ({ type: "array", items });
const stringMap: Schema = { type: "object", additionalProperties: { type: "string" } };
const anything: Schema = { type: "object", "x-kubernetes-preserve-unknown-fields": true };

function crd(group: string, version: string, kind: string, plural: string, spec: Schema): Schema {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${plural}.${group}` },
    spec: {
      group,
      scope: "Namespaced",
      names: { kind, listKind: `${kind}List`, plural, singular: kind.toLowerCase() },
      versions: [
        {
          name: version,
          served: true,
          storage: true,
          subresources: { status: {} },
          schema: {
            openAPIV3Schema: obj({ apiVersion: str, kind: str, metadata: { type: "object" }, spec, status: anything }),
          },
        },
      ],
    },
  };
}

const gitRepository = crd(
  "source.toolkit.fluxcd.io",
  "v1",
  "GitRepository",
  "gitrepositories",
  obj(
    {
      url: { type: "string", pattern: "^(http|https|ssh)://.*$" },
      ref: obj({ branch: str, tag: str, semver: str, name: str, commit: str }),
      secretRef: obj({ name: str }, ["name"]),
      interval: duration,
      timeout: duration,
      ignore: str,
      suspend: bool,
      recurseSubmodules: bool,
    },
    ["interval", "url"],
  ),
);

const crossNamespaceRef = obj({ name: str, namespace: str }, ["name"]);
const kustomization = crd(
  "kustomize.toolkit.fluxcd.io",
  "v1",
  "Kustomization",
  "kustomizations",
  obj(
    {
      sourceRef: obj(
        {
          apiVersion: str,
          kind: { type: "string", enum: ["OCIRepository", "GitRepository", "Bucket", "ExternalArtifact"] },
          name: str,
          namespace: str,
        },
        ["kind", "name"],
      ),
      path: str,
      interval: duration,
      retryInterval: duration,
      timeout: duration,
      prune: bool,
      wait: bool,
      force: bool,
      suspend: bool,
      targetNamespace: { type: "string", maxLength: 63, minLength: 1 },
      serviceAccountName: str,
      dependsOn: arrayOf(crossNamespaceRef),
      healthChecks: arrayOf(obj({ apiVersion: str, kind: str, name: str, namespace: str }, ["kind", "name"])),
      commonMetadata: obj({ labels: stringMap, annotations: stringMap }),
      components: arrayOf(str),
      patches: arrayOf(obj({ patch: str, target: anything }, ["patch"])),
      postBuild: anything,
    },
    ["interval", "prune", "sourceRef"],
  ),
);

const helm = obj({
  releaseName: str,
  valueFiles: arrayOf(str),
  values: str,
  valuesObject: anything,
  parameters: arrayOf(obj({ name: str, value: str, forceString: bool })),
  skipCrds: bool,
  namespace: str,
  version: str,
});
const source = obj(
  {
    repoURL: str,
    path: str,
    targetRevision: str,
    chart: str,
    ref: str,
    helm,
    kustomize: anything,
    directory: anything,
  },
  ["repoURL"],
);
const application = crd(
  "argoproj.io",
  "v1alpha1",
  "Application",
  "applications",
  obj(
    {
      project: str,
      source,
      sources: arrayOf(source),
      destination: obj({ server: str, name: str, namespace: str }),
      syncPolicy: obj({
        automated: obj({ prune: bool, selfHeal: bool, allowEmpty: bool, enabled: bool }),
        syncOptions: arrayOf(str),
        managedNamespaceMetadata: obj({ labels: stringMap, annotations: stringMap }),
        retry: anything,
      }),
      ignoreDifferences: arrayOf(anything),
      info: arrayOf(obj({ name: str, value: str }, ["name", "value"])),
      revisionHistoryLimit: { type: "integer" },
    },
    ["destination", "project"],
  ),
);

/** The three stand-in CRDs, ready for `kubectl apply -f -`. */
export const gitopsCrds = [gitRepository, kustomization, application].map((c) => stringify(c)).join("---\n");
