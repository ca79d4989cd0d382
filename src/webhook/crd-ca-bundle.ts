import type { KubeClient } from "../kube/client.ts";
import type { KubeObject, ResourceType } from "../kube/types.ts";
import { group } from "../resources/group.ts";
import { crdDefinitions } from "../resources/crd-files.ts";

// Puts the webhook's CA into the caBundle of the mds.dev CRDs that send their conversions to this webhook, and
// back whenever a CRD is applied again without it (crds/ carries no caBundle: it cannot know the cluster's CA).
// A CRD whose conversion is not this webhook's (strategy None: the CRDs of 0.1.0; another address) is left alone.

export const CrdType: ResourceType = {
  group: "apiextensions.k8s.io",
  version: "v1",
  plural: "customresourcedefinitions",
  kind: "CustomResourceDefinition",
  namespaced: false,
};

/** Where the CRDs send their conversions when they are this webhook's: its Service, or its URL (devkube, tests). */
export type WebhookAddress = { service: { namespace: string; name: string } } | { url: string };

/** The six CRDs of mds: the only ones the webhook touches (its RBAC names them). */
export const mdsCrdNames: readonly string[] = crdDefinitions.map((d) => `${d.plural}.${group}`);

interface Crd extends KubeObject {
  spec?: {
    conversion?: {
      strategy?: string;
      webhook?: { clientConfig?: { caBundle?: string; url?: string; service?: { namespace?: string; name?: string } } };
    };
  };
}

function clientConfigOf(crd: Crd, address: WebhookAddress) {
  const conversion = crd.spec?.conversion;
  if (!mdsCrdNames.includes(crd.metadata.name) || conversion?.strategy !== "Webhook") return undefined;
  const config = conversion.webhook?.clientConfig;
  if (!config) return undefined;
  const ours =
    "url" in address
      ? config.url === address.url
      : config.service?.namespace === address.service.namespace && config.service.name === address.service.name;
  return ours ? config : undefined;
}

/** Patches the CRD's caBundle when it converts through this webhook and holds another one. True when patched. */
export async function injectCaBundle(
  kube: KubeClient,
  crd: Crd,
  caCert: string,
  address: WebhookAddress,
): Promise<boolean> {
  const config = clientConfigOf(crd, address);
  const caBundle = Buffer.from(caCert).toString("base64");
  if (!config || config.caBundle === caBundle) return false;
  await kube.patch(CrdType, undefined, crd.metadata.name, {
    metadata: { resourceVersion: crd.metadata.resourceVersion },
    spec: { conversion: { webhook: { clientConfig: { caBundle } } } },
  });
  return true;
}
