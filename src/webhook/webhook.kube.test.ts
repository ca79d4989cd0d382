import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { Agent, fetch } from "undici";
import { startDevkube, type Devkube } from "@mds/devkube";
import { createKubeClient, type KubeClient } from "../kube/client.ts";
import { parseKubeConfig, type KubeConfig } from "../kube/kubeconfig.ts";
import { SecretType, type KubeObject, type Secret } from "../kube/types.ts";
import { crdOf } from "../resources/kit/crd.ts";
import { crdDefinitions } from "../resources/crd-files.ts";
import { eventually } from "../../test/support/eventually.ts";
import { ensureServingCertificate } from "./certificates.ts";
import { CrdType, injectCaBundle } from "./crd-ca-bundle.ts";
import { startWebhook, type Webhook } from "./index.ts";

// `mds webhook`'s parts on devkube: the certificate Secret it makes and reuses, the caBundle it injects into the
// CRDs that point at it (and only those), and ConversionReviews over HTTPS verified against that CA.

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

type Crd = KubeObject & { spec: { conversion?: { webhook?: { clientConfig?: { caBundle?: string } } } } };

describe("the conversion webhook on devkube", () => {
  let dir = "";
  let kube: Devkube;
  let kubeConfig: KubeConfig;
  let client: KubeClient;
  let webhook: Webhook | undefined;
  let url = "";
  const logger = pino({ level: "silent" });
  const start = () =>
    startWebhook({
      kube: client,
      kubeConfig,
      logger,
      namespace: "mds-system",
      secretName: "mds-webhook-tls",
      address: { url },
      port: Number(new URL(url).port),
      host: "127.0.0.1",
    });

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "mds-webhook-"));
    kube = await startDevkube({ dir: join(dir, "kube"), port: 0 });
    kubeConfig = parseKubeConfig(kube.kubeconfig);
    client = createKubeClient(kubeConfig);
    await client.create(
      { group: "", version: "v1", plural: "namespaces", kind: "Namespace", namespaced: false },
      {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: "mds-system" },
      },
    );
    url = `https://127.0.0.1:${await freePort()}/convert`;
    for (const def of crdDefinitions) await client.create(CrdType, crdOf(def, { conversion: { url } }) as KubeObject);
    webhook = await start();
  });
  afterAll(async () => {
    await webhook?.stop();
    await kubeConfig?.close();
    await kube?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it("injects its CA into every CRD that converts through it", async () => {
    const caBundle = Buffer.from(webhook!.caCert).toString("base64");
    for (const def of crdDefinitions) {
      await eventually(
        async () => {
          const crd = await client.get<Crd>(CrdType, undefined, `${def.plural}.mds.dev`);
          expect(crd?.spec.conversion?.webhook?.clientConfig?.caBundle).toBe(caBundle);
        },
        { what: `the caBundle of ${def.plural}.mds.dev` },
      );
    }
  });

  it("keeps its CA in a kubernetes.io/tls Secret and reuses it on the next start", async () => {
    const secret = await client.get<Secret>(SecretType, "mds-system", "mds-webhook-tls");
    expect(secret?.type).toBe("kubernetes.io/tls");
    expect(Object.keys(secret?.data ?? {}).sort()).toEqual(["ca.crt", "ca.key", "tls.crt", "tls.key"]);
    const first = webhook!.caCert;
    await webhook!.stop();
    webhook = await start();
    expect(webhook.caCert).toBe(first);
    const again = await client.get<Secret>(SecretType, "mds-system", "mds-webhook-tls");
    expect(again?.metadata.resourceVersion).toBe(secret?.metadata.resourceVersion);
  });

  it("re-issues the serving certificate from the same CA 30 days before it expires", async () => {
    const options = { namespace: "mds-system", secretName: "mds-webhook-tls", hosts: ["127.0.0.1"] };
    const now = await ensureServingCertificate(client, options);
    const later = await ensureServingCertificate(client, {
      ...options,
      now: () => new Date(now.renewAt.getTime() + 1),
    });
    expect(later.caCert).toBe(now.caCert);
    expect(later.cert).not.toBe(now.cert);
    expect(later.renewAt.getTime()).toBeGreaterThan(now.renewAt.getTime());
    const another = await ensureServingCertificate(client, { ...options, hosts: ["mds-webhook.mds-system.svc"] });
    expect(another.caCert).toBe(now.caCert); // a new name: a new leaf, the same CA
  });

  it("leaves a CRD alone that converts elsewhere or not at all", async () => {
    const crd = crdOf(crdDefinitions[0]!, { conversion: { url: "https://127.0.0.1:1/convert" } }) as Crd;
    expect(await injectCaBundle(client, crd, webhook!.caCert, { url })).toBe(false);
    const none = crdOf(crdDefinitions[0]!) as Crd;
    expect(await injectCaBundle(client, none, webhook!.caCert, { url })).toBe(false);
  });

  it("converts a ConversionReview over HTTPS verified against its CA", async () => {
    const dispatcher = new Agent({ connect: { ca: webhook!.caCert } });
    const post = (body: unknown) =>
      fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
        dispatcher,
      });
    const review = (objects: unknown[], desiredAPIVersion = "mds.dev/v1beta1") => ({
      apiVersion: "apiextensions.k8s.io/v1",
      kind: "ConversionReview",
      request: { uid: "u-1", desiredAPIVersion, objects },
    });
    const db = {
      apiVersion: "mds.dev/v1alpha1",
      kind: "Database",
      metadata: { name: "orders", namespace: "shop", uid: "x" },
      spec: { projectRef: { name: "shop" }, source: { type: "empty" }, connectionSecret: { endpoint: "direct" } },
      status: { credentials: { secret: "shop/mds-credentials", key: "token", source: "namespace" } },
    };
    const ok = await post(review([db]));
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({
      apiVersion: "apiextensions.k8s.io/v1",
      kind: "ConversionReview",
      response: {
        uid: "u-1",
        result: { status: "Success" },
        convertedObjects: [
          {
            ...db,
            apiVersion: "mds.dev/v1beta1",
            spec: { ...db.spec, source: { type: "Empty" }, connectionSecret: { endpoint: "Direct" } },
            status: { credentials: { ...db.status.credentials, source: "Namespace" } },
          },
        ],
      },
    });

    const refused = (await (await post(review([db], "mds.dev/v9"))).json()) as { response: { result: unknown } };
    expect(refused.response.result).toEqual({
      status: "Failure",
      message: 'apiVersion "mds.dev/v9" is not one of mds.dev/v1alpha1, mds.dev/v1beta1',
    });

    const notReview = await post({ kind: "AdmissionReview" });
    expect(notReview.status).toBe(400);
    expect(((await notReview.json()) as { message: string }).message).toMatch(/expected a ConversionReview/);
    const notJson = await fetch(url, { method: "POST", body: "{", dispatcher });
    expect(notJson.status).toBe(400);
    await dispatcher.close();
  });
});
