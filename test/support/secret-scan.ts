import { readFile } from "node:fs/promises";
import { CoreV1Api, CustomObjectsApi, KubeConfig } from "@kubernetes/client-node";
import { group, version } from "../../src/resources/group.ts";
import { kindModules } from "../../src/resources/index.ts";

// Finds planted secrets (tokens, passwords, connection strings) where they must never appear:
// log files, Kubernetes Events, object statuses. It looks for each secret in the forms a leak
// takes in practice: as is, percent-encoded (inside a URL), JSON-escaped, and base64 (a Secret's
// `data`, a basic-auth header, a dumped object) at every byte alignment, so a secret embedded
// inside a larger base64 blob is found too.

export interface PlantedSecret {
  /** A label for reports, e.g. "api token"; never the secret itself. */
  name: string;
  value: string;
}

export type SecretForm = "plain" | "url-encoded" | "json-escaped" | "base64" | "base64url";

export interface SecretFinding {
  /** The planted secret's label. */
  secret: string;
  form: SecretForm;
  /** Where: a file path, `event ns/name`, `databases.mds.dev ns/name status`, … */
  where: string;
  /** 1-based line for text sources. */
  line?: number;
}

/** Shorter secrets would match by chance; a planted secret must be long and random. */
export const minimumSecretLength = 8;

interface Needle {
  secret: string;
  form: SecretForm;
  text: string;
}

/**
 * The base64 text that appears in any base64 encoding of a string containing `value`, for each of the
 * three byte alignments: the characters touched by neighbouring bytes are trimmed off both ends.
 */
function base64Fragments(value: Buffer, encoding: "base64" | "base64url"): string[] {
  const out: string[] = [];
  for (let offset = 0; offset < 3; offset++) {
    const padded = Buffer.concat([Buffer.alloc(offset), value]);
    let text = padded.toString(encoding).replace(/=+$/, "");
    // Leading chars that mix padding bytes with the secret's bytes.
    const skip = offset === 0 ? 0 : offset === 1 ? 2 : 3;
    text = text.slice(skip);
    // Trailing chars that mix the secret's last bytes with whatever follows.
    const tailBytes = (offset + value.length) % 3;
    if (tailBytes !== 0) text = text.slice(0, -1);
    if (text.length >= minimumSecretLength) out.push(text);
  }
  return out;
}

function needlesFor(secrets: readonly PlantedSecret[]): Needle[] {
  const needles: Needle[] = [];
  for (const s of secrets) {
    if (s.value.length < minimumSecretLength) {
      throw new Error(
        `cannot scan for secret "${s.name}": shorter than ${minimumSecretLength} characters, it would match by chance`,
      );
    }
    const add = (form: SecretForm, text: string) => {
      if (!needles.some((n) => n.secret === s.name && n.text === text)) needles.push({ secret: s.name, form, text });
    };
    add("plain", s.value);
    add("url-encoded", encodeURIComponent(s.value));
    add("json-escaped", JSON.stringify(s.value).slice(1, -1));
    const bytes = Buffer.from(s.value, "utf8");
    for (const f of base64Fragments(bytes, "base64")) add("base64", f);
    for (const f of base64Fragments(bytes, "base64url")) add("base64url", f);
  }
  return needles;
}

/** Scans one text; each secret is reported once per line and form. */
export function scanText(text: string, secrets: readonly PlantedSecret[], where: string): SecretFinding[] {
  const needles = needlesFor(secrets);
  const findings: SecretFinding[] = [];
  const lines = text.split("\n");
  lines.forEach((lineText, index) => {
    for (const needle of needles) {
      if (lineText.includes(needle.text))
        findings.push({ secret: needle.secret, form: needle.form, where, line: index + 1 });
    }
  });
  return dedupe(findings);
}

function dedupe(findings: SecretFinding[]): SecretFinding[] {
  const seen = new Set<string>();
  return findings.filter((f) => {
    const key = `${f.secret}|${f.where}|${f.line ?? ""}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/** Scans files (missing files are skipped: a component that never logged leaked nothing). */
export async function scanFiles(paths: readonly string[], secrets: readonly PlantedSecret[]): Promise<SecretFinding[]> {
  const findings: SecretFinding[] = [];
  for (const path of paths) {
    let text: string;
    try {
      text = await readFile(path, "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") continue;
      throw error;
    }
    findings.push(...scanText(text, secrets, path));
  }
  return findings;
}

export interface KubernetesScanOptions {
  /** Custom resources to scan whole (spec, status, metadata). Default: the mds.dev kinds. */
  customResources?: ReadonlyArray<{ group: string; version: string; plural: string }>;
}

// Every kind of the registry, so a new kind (and its status) is scanned without anyone remembering to add it here.
export const customResourcesOf = (kinds: readonly { definition: { plural: string } }[]) =>
  kinds.map((k) => ({ group, version, plural: k.definition.plural }));
export const mdsCustomResources = customResourcesOf(kindModules);

interface Meta {
  metadata?: {
    namespace?: string;
    name?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
}

function scanObject(value: unknown, secrets: readonly PlantedSecret[], where: string): SecretFinding[] {
  // Re-indent so findings carry a useful line number inside the object.
  return scanText(JSON.stringify(value, null, 1), secrets, where);
}

/**
 * Scans what Kubernetes users and tools see: every Event (message, reason, note), the mds custom
 * resources (status, conditions, annotations), ConfigMaps, and the metadata of Secrets (labels and
 * annotations are readable by anyone who can list Secrets' metadata; `data` is where secrets belong).
 */
export async function scanKubernetes(
  kubeconfig: KubeConfig | string,
  secrets: readonly PlantedSecret[],
  options: KubernetesScanOptions = {},
): Promise<SecretFinding[]> {
  let kc: KubeConfig;
  if (typeof kubeconfig === "string") {
    kc = new KubeConfig();
    kc.loadFromFile(kubeconfig);
  } else {
    kc = kubeconfig;
  }
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const findings: SecretFinding[] = [];
  const at = (kind: string, o: Meta, part = "") =>
    `${kind} ${o.metadata?.namespace ?? ""}/${o.metadata?.name ?? ""}${part}`;

  const events = await core.listEventForAllNamespaces({});
  for (const e of events.items) findings.push(...scanObject(e, secrets, at("event", e)));

  for (const cr of options.customResources ?? mdsCustomResources) {
    let list: { items?: unknown[] };
    try {
      list = (await custom.listClusterCustomObject({ group: cr.group, version: cr.version, plural: cr.plural })) as {
        items?: unknown[];
      };
    } catch (error) {
      // A CRD that is not installed has nothing to leak.
      if ((error as { code?: number }).code === 404) continue;
      throw error;
    }
    for (const item of list.items ?? [])
      findings.push(...scanObject(item, secrets, at(`${cr.plural}.${cr.group}`, item as Meta)));
  }

  const configMaps = await core.listConfigMapForAllNamespaces({});
  for (const cm of configMaps.items) findings.push(...scanObject(cm, secrets, at("configmap", cm)));

  const secretList = await core.listSecretForAllNamespaces({});
  for (const s of secretList.items) {
    const metadata = { labels: s.metadata?.labels ?? {}, annotations: s.metadata?.annotations ?? {} };
    findings.push(...scanObject(metadata, secrets, at("secret", s, " metadata")));
  }
  return findings;
}

/** One line per finding, naming the secret's label and never its value. */
export function formatFindings(findings: readonly SecretFinding[]): string {
  return findings
    .map((f) => `${f.secret} (${f.form}) in ${f.where}${f.line === undefined ? "" : `:${f.line}`}`)
    .join("\n");
}
