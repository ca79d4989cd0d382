import { randomBytes, X509Certificate } from "node:crypto";
import { isIP } from "node:net";
import { generate } from "selfsigned";
import type { KubeClient } from "../kube/client.ts";
import { KubeConflictError } from "../kube/errors.ts";
import { SecretType, type Secret } from "../kube/types.ts";

// The webhook's serving certificate, managed without a human: a CA and a serving certificate it signs, kept in one
// Secret of the webhook's namespace so every replica serves a certificate of the same CA, and the CA's certificate
// injected as caBundle into the CRDs (crd-ca-bundle.ts). The first replica to start writes the Secret; the others
// read it (a lost create or update race re-reads). The serving certificate is re-issued from the same CA 30 days
// before it expires, so the caBundle stays valid for the CA's ten years; a new CA is made only when the Secret is
// gone or its CA is about to expire.

const day = 24 * 60 * 60 * 1000;
const caLifetime = 3650 * day;
const servingLifetime = 365 * day;
/** Re-issue this long before the end. */
const renewBefore = 30 * day;

export interface ServingMaterial {
  /** PEM of the CA: the CRDs' caBundle (base64 of it). */
  caCert: string;
  cert: string;
  key: string;
  /** When the serving certificate must be re-issued. */
  renewAt: Date;
}

interface Options {
  namespace: string;
  secretName: string;
  /** DNS names or IP addresses the API server reaches the webhook by. */
  hosts: string[];
  now?: () => Date;
}

const decode = (s: string | undefined) => (s === undefined ? undefined : Buffer.from(s, "base64").toString("utf8"));

function covers(cert: X509Certificate, host: string): boolean {
  return isIP(host) ? cert.checkIP(host) !== undefined : cert.checkHost(host) !== undefined;
}

/** The Secret's certificates when they still serve: the leaf signed by the CA, naming every host, not due. */
function usable(secret: Secret | undefined, options: Options, now: Date): ServingMaterial | undefined {
  const [caCert, cert, key] = ["ca.crt", "tls.crt", "tls.key"].map((k) => decode(secret?.data?.[k]));
  if (!caCert || !cert || !key) return undefined;
  try {
    const ca = new X509Certificate(caCert);
    const leaf = new X509Certificate(cert);
    const renewAt = new Date(Math.min(Date.parse(leaf.validTo), Date.parse(ca.validTo)) - renewBefore);
    if (!leaf.verify(ca.publicKey) || renewAt <= now) return undefined;
    if (!options.hosts.every((h) => covers(leaf, h))) return undefined;
    return { caCert, cert, key, renewAt };
  } catch {
    return undefined; // unreadable: made anew
  }
}

/** The Secret's CA when it has a year left; otherwise a new one. */
async function caOf(secret: Secret | undefined, now: Date): Promise<{ cert: string; key: string }> {
  const [cert, key] = ["ca.crt", "ca.key"].map((k) => decode(secret?.data?.[k]));
  if (cert && key) {
    try {
      if (Date.parse(new X509Certificate(cert).validTo) - now.getTime() > 365 * day) return { cert, key };
    } catch {
      /* made anew below */
    }
  }
  const ca = await generate([{ name: "commonName", value: `mds webhook CA ${randomBytes(6).toString("hex")}` }], {
    keyType: "ec",
    algorithm: "sha256",
    notBeforeDate: now,
    notAfterDate: new Date(now.getTime() + caLifetime),
    extensions: [
      { name: "basicConstraints", cA: true, pathLenConstraint: 0, critical: true },
      { name: "keyUsage", keyCertSign: true, cRLSign: true, critical: true },
    ],
  });
  return { cert: ca.cert, key: ca.private };
}

async function issue(ca: { cert: string; key: string }, hosts: string[], now: Date) {
  return generate([{ name: "commonName", value: hosts[0] ?? "mds-webhook" }], {
    keyType: "ec",
    algorithm: "sha256",
    notBeforeDate: now,
    notAfterDate: new Date(now.getTime() + servingLifetime),
    ca: { key: ca.key, cert: ca.cert },
    extensions: [
      { name: "basicConstraints", cA: false },
      { name: "keyUsage", digitalSignature: true, keyEncipherment: true, critical: true },
      { name: "extKeyUsage", serverAuth: true },
      {
        name: "subjectAltName",
        altNames: hosts.map((h) => (isIP(h) ? { type: 7 as const, ip: h } : { type: 2 as const, value: h })),
      },
    ],
  });
}

/** The serving certificate from the Secret, written there first when it is missing, unusable or due. */
export async function ensureServingCertificate(kube: KubeClient, options: Options): Promise<ServingMaterial> {
  const now = options.now ?? (() => new Date());
  for (let attempt = 0; ; attempt++) {
    const secret = await kube.get<Secret>(SecretType, options.namespace, options.secretName);
    const current = usable(secret, options, now());
    if (current) return current;
    const ca = await caOf(secret, now());
    const leaf = await issue(ca, options.hosts, now());
    const b64 = (s: string) => Buffer.from(s).toString("base64");
    const body: Secret = {
      apiVersion: "v1",
      kind: "Secret",
      metadata: {
        name: options.secretName,
        namespace: options.namespace,
        labels: { "app.kubernetes.io/name": "mds-webhook", "app.kubernetes.io/part-of": "mds" },
        ...(secret?.metadata.resourceVersion ? { resourceVersion: secret.metadata.resourceVersion } : {}),
      },
      type: "kubernetes.io/tls",
      data: { "ca.crt": b64(ca.cert), "ca.key": b64(ca.key), "tls.crt": b64(leaf.cert), "tls.key": b64(leaf.private) },
    };
    try {
      if (secret) await kube.replace(SecretType, body);
      else await kube.create(SecretType, body);
    } catch (err) {
      // Another replica wrote it first (409 on create or on a stale resourceVersion): use theirs.
      if (err instanceof KubeConflictError && attempt < 3) continue;
      throw err;
    }
  }
}
