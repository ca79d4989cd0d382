import { z } from "zod";
import { parseArgs } from "node:util";
import { kindModules, kindSettings, type DeclaredSetting } from "../resources/index.ts";
import { duration } from "../resources/kit/settings.ts";
import type { KindSettingValues } from "../resources/mds-kind.ts";

// The one configuration schema of `mds operator`: every option is a flag and an environment variable
// (flags win). Its own options are below; a kind's settings are declared in its module (`settings`) and parsed
// here beside them. Parsed once at start; a bad value stops the process with a message naming the flag and the
// variable.

const levels = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;

const bool = z.string().transform((s, ctx) => {
  const v = s.trim().toLowerCase();
  if (["true", "1", "yes", "on"].includes(v)) return true;
  if (["false", "0", "no", "off"].includes(v)) return false;
  ctx.addIssue({ code: "custom", message: `expected true or false, got "${s}"` });
  return z.NEVER;
});

const secretRef = z.string().transform((s, ctx) => {
  const m = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([a-z0-9]([-a-z0-9.]*[a-z0-9])?)$/.exec(s.trim());
  if (!m) {
    ctx.addIssue({ code: "custom", message: `expected <namespace>/<name> of a Secret, got "${s}"` });
    return z.NEVER;
  }
  return { namespace: m[1]!, name: m[3]! };
});

const OperatorOptions = z.object({
  kubeconfig: z.string().min(1).optional(),
  context: z.string().min(1).optional(),
  apiUrl: z.url({ protocol: /^https?$/, error: "expected an http(s) URL of the service API" }),
  credentialsSecret: secretRef.default({ namespace: "mds-system", name: "mds-credentials" }),
  credentialsKey: z
    .string()
    .regex(/^[-._a-zA-Z0-9]+$/, "expected a Secret data key")
    .default("token"),
  // Unset: only the credentials Secret's own namespace. "*": every namespace (one team, or a dev cluster).
  credentialsFallbackNamespaces: z
    .string()
    .transform((s) =>
      s
        .split(",")
        .map((n) => n.trim())
        .filter((n) => n !== ""),
    )
    .pipe(
      z
        .array(
          z
            .string()
            .regex(
              /^([a-z0-9]([-a-z0-9]*[a-z0-9])?|\*)$/,
              'expected namespace names separated by commas, or "*" for every namespace',
            ),
        )
        .min(1, 'expected namespace names separated by commas, or "*" for every namespace'),
    )
    .optional(),
  namespaces: z
    .string()
    .transform((s) =>
      s
        .split(",")
        .map((n) => n.trim())
        .filter((n) => n !== ""),
    )
    .pipe(z.array(z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, "expected namespace names separated by commas")))
    .optional(),
  instanceId: z
    .string()
    .regex(/^[A-Za-z0-9._-]{1,40}$/, "expected 1-40 characters of letters, digits, '.', '_' or '-'")
    .default("default"),
  concurrency: z.coerce.number().int().min(1).max(64).default(4),
  pollFast: duration(100, 600_000).default(1000),
  pollSlow: duration(1000, 86_400_000).default(300_000),
  leaderElect: bool.default(true),
  leaseNamespace: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/)
    .optional(),
  leaseName: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/)
    .default("mds-operator"),
  identity: z.string().min(1).max(128).optional(),
  metricsAddress: z.string().default(":8080"),
  logLevel: z.enum(levels).default("info"),
  // Unset: the client's default budget per credential (10 requests/s, burst 20), as the service grants.
  apiRate: z.coerce
    .number({ error: "expected requests per second, a number" })
    .positive("expected more than 0 requests per second")
    .max(10_000)
    .optional(),
  apiBurst: z.coerce
    .number({ error: "expected a whole number of requests" })
    .int("expected a whole number of requests")
    .min(1)
    .max(10_000)
    .optional(),
  // Off: watching every Pod and workload costs memory and rights a cluster admin grants on purpose (deploy/components/rotation-consumers).
  rotationConsumers: bool.default(false),
});
/** What `mds operator` runs with: its own options, and each kind's settings by kind. */
export type OperatorConfig = z.infer<typeof OperatorOptions> & { kindSettings: KindSettingValues };

type Key = keyof z.input<typeof OperatorOptions>;
type Option = { flag: string; env: string; help: string };

// flag name, environment variable, help text
export const operatorOptions: Record<Key, Option> = {
  kubeconfig: {
    flag: "kubeconfig",
    env: "KUBECONFIG",
    help: "kubeconfig file to reach the Kubernetes API (default: the in-cluster config, else ~/.kube/config); set it only when running outside the cluster",
  },
  context: {
    flag: "context",
    env: "MDS_KUBE_CONTEXT",
    help: "kubeconfig context to use (default: the current one); set it when the kubeconfig holds several clusters",
  },
  apiUrl: {
    flag: "api-url",
    env: "MDS_API_URL",
    help: "base URL of the Managed Database Service API every kind talks to (required; no default)",
  },
  credentialsSecret: {
    flag: "credentials-secret",
    env: "MDS_CREDENTIALS_SECRET",
    help: "<namespace>/<name> of the Secret holding the default API token (default mds-system/mds-credentials); change it when you install into another namespace",
  },
  credentialsKey: {
    flag: "credentials-key",
    env: "MDS_CREDENTIALS_KEY",
    help: "key of the token in that Secret (default token); change it to reuse a Secret whose key has another name",
  },
  credentialsFallbackNamespaces: {
    flag: "credentials-fallback-namespaces",
    env: "MDS_CREDENTIALS_FALLBACK_NAMESPACES",
    help: "namespaces whose resources may use the default API token when they have no mds-credentials Secret of their own (comma-separated, * for all; default: the credentials Secret's namespace only); widen it only when those teams may share one workspace",
  },
  namespaces: {
    flag: "namespaces",
    env: "MDS_WATCH_NAMESPACES",
    help: "comma-separated namespaces to watch (default: all); set it to run one operator per namespace or with namespaced RBAC",
  },
  instanceId: {
    flag: "instance-id",
    env: "MDS_INSTANCE_ID",
    help: "stable id of this installation, part of every logicalId k8s:<id>:<ns>/<name> (default: default); give each cluster sharing a workspace its own, and keep it across rebuilds of a cluster so re-created resources adopt their objects again",
  },
  concurrency: {
    flag: "concurrency",
    env: "MDS_CONCURRENCY",
    help: "reconcile workers per kind (default 4); raise it when the work-queue depth stays high and the API budget has room",
  },
  pollFast: {
    flag: "poll-fast",
    env: "MDS_POLL_FAST",
    help: "poll interval of objects that are provisioning or recovering (default 1s); lengthen it to spend less of the API budget while many are in flight",
  },
  pollSlow: {
    flag: "poll-slow",
    env: "MDS_POLL_SLOW",
    help: "resync interval of settled objects, which also bounds how late a remote change is seen (default 5m; a burst of creates puts its token's resync off, at most two intervals); lengthen it when many objects share one token's budget",
  },
  leaderElect: {
    flag: "leader-elect",
    env: "MDS_LEADER_ELECT",
    help: "elect one active replica through a Lease (default true); turn it off (--no-leader-elect) only when exactly one replica can ever run",
  },
  leaseNamespace: {
    flag: "lease-namespace",
    env: "POD_NAMESPACE",
    help: "namespace of the Lease (default: the credentials Secret's namespace); set it when the operator may not write Leases there",
  },
  leaseName: {
    flag: "lease-name",
    env: "MDS_LEASE_NAME",
    help: "name of the Lease (default mds-operator); give two installations in one namespace different names",
  },
  identity: {
    flag: "identity",
    env: "POD_NAME",
    help: "this replica's identity in the Lease (default <hostname>_<random>); a stable one lets a restarted replica take its lease back at once",
  },
  metricsAddress: {
    flag: "metrics-address",
    env: "MDS_METRICS_ADDRESS",
    help: "listen address of /metrics, /healthz and /readyz (default :8080; off disables them); change it when the port is taken, but probes need it",
  },
  logLevel: {
    flag: "log-level",
    env: "MDS_LOG_LEVEL",
    help: `log level: ${levels.join(", ")} (default info); debug or trace while troubleshooting`,
  },
  apiRate: {
    flag: "api-rate",
    env: "MDS_API_RATE",
    help: "API requests per second per credential, shared by every kind using that token (default 10, under the service's 20/s per workspace); raise it only when the API grants more, since it answers 429 past its budget",
  },
  apiBurst: {
    flag: "api-burst",
    env: "MDS_API_BURST",
    help: "API requests at once per credential after a quiet spell (default 20); raise it with --api-rate, never above the API's burst",
  },
  rotationConsumers: {
    flag: "rotation-consumers",
    env: "MDS_ROTATION_CONSUMERS",
    help: "follow the consumers of connection Secrets (default false): watch Deployments, StatefulSets, DaemonSets and Pods so a rotation with connectionSecret.rotation.consumers Restart or Wait rolls them and revokes the old credentials only once they moved; needs the rights of the rotation-consumers component (deploy/components/rotation-consumers, chart value rotationConsumers.enabled)",
  },
};

/** The kinds whose settings `mds operator` takes: the registry's (a test passes one more). */
type Kinds = Parameters<typeof kindSettings>[0];

export function operatorHelp(kinds: Kinds = kindModules): string {
  // Each flag on its own line, its help wrapped below it: the texts say what, the default and when to change it.
  const rows = (options: Option[]) =>
    options.flatMap((o) => [`  --${o.flag} (env ${o.env})`, ...wrap(o.help, 6, 110), ""]);
  const settings = kindSettings(kinds);
  return [
    "usage: mds operator [options]",
    "",
    "Every option is a flag or an environment variable; the flag wins.",
    "",
    ...rows(Object.values(operatorOptions)),
    ...[...new Set(settings.map((d) => d.kind))].flatMap((kind) => [
      `${kind} settings:`,
      "",
      ...rows(settings.filter((d) => d.kind === kind).map((d) => d.setting)),
    ]),
  ]
    .join("\n")
    .trimEnd();
}

function wrap(text: string, indent: number, width: number): string[] {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(" ")) {
    if (line !== "" && indent + line.length + 1 + word.length > width) {
      lines.push(" ".repeat(indent) + line);
      line = word;
    } else line = line === "" ? word : `${line} ${word}`;
  }
  if (line !== "") lines.push(" ".repeat(indent) + line);
  return lines;
}

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

// Spellings other tools use (client-go's --leader-elect=false, controller-runtime's --leader-election-namespace).
function normalizeArgv(argv: string[]): string[] {
  return argv.map((arg) => {
    const m = /^--leader-elect=(.*)$/.exec(arg);
    if (m) return ["false", "0", "no", "off"].includes(m[1]!.toLowerCase()) ? "--no-leader-elect" : "--leader-elect";
    return arg.replace(/^--leader-election-namespace(?==|$)/, "--lease-namespace");
  });
}

/** Flags first, then the environment; throws ConfigError naming the flag and the variable. */
export function parseOperatorConfig(
  argv: string[],
  env: Record<string, string | undefined>,
  kinds: Kinds = kindModules,
): OperatorConfig | "help" {
  const entries = Object.entries(operatorOptions) as [Key, Option][];
  const settings = kindSettings(kinds);
  const options: Record<string, { type: "string" | "boolean"; short?: string }> = {
    help: { type: "boolean", short: "h" },
  };
  for (const [key, o] of entries)
    options[o.flag] = { type: key === "leaderElect" || key === "rotationConsumers" ? "boolean" : "string" };
  const envs = new Set(entries.map(([, o]) => o.env));
  for (const { kind, setting } of settings) {
    if (options[setting.flag] !== undefined || envs.has(setting.env))
      throw new Error(`${kind}'s setting --${setting.flag} (${setting.env}) is one of mds operator's own options`);
    options[setting.flag] = { type: "string" };
  }
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: normalizeArgv(argv),
      options,
      strict: true,
      allowPositionals: false,
      allowNegative: true,
    }));
  } catch (err) {
    throw new ConfigError(err instanceof Error ? err.message : String(err));
  }
  if (values.help === true) return "help";
  const valueOf = (o: { flag: string; env: string }) => {
    const flag = values[o.flag];
    const value = typeof flag === "boolean" ? String(flag) : (flag ?? env[o.env]);
    return value === "" ? undefined : value;
  };
  const raw: Record<string, string> = {};
  for (const [key, o] of entries) {
    const value = valueOf(o);
    if (value !== undefined) raw[key] = value;
  }
  const problems: string[] = [];
  const parsed = OperatorOptions.safeParse(raw);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      const key = issue.path[0] as Key | undefined;
      const o = key === undefined ? undefined : operatorOptions[key];
      const where = o ? `--${o.flag} (${o.env})` : "configuration";
      const message = issue.code === "invalid_type" && raw[key ?? ""] === undefined ? "is required" : issue.message;
      problems.push(`${where}: ${message}`);
    }
  }
  const kindValues = parseKindSettings(settings, valueOf, problems);
  if (!parsed.success || problems.length > 0) throw new ConfigError(`invalid configuration: ${problems.join("; ")}`);
  return { ...parsed.data, kindSettings: kindValues };
}

/** Each kind's settings that were given, by kind; a bad one's message goes to `problems`. */
function parseKindSettings(
  settings: DeclaredSetting[],
  valueOf: (o: { flag: string; env: string }) => string | undefined,
  problems: string[],
): KindSettingValues {
  const byKind: Record<string, Record<string, unknown>> = {};
  for (const { kind, key, setting } of settings) {
    const text = valueOf(setting);
    if (text === undefined) continue;
    const result = setting.parse.safeParse(text);
    if (result.success) (byKind[kind] ??= {})[key] = result.data;
    else for (const issue of result.error.issues) problems.push(`--${setting.flag} (${setting.env}): ${issue.message}`);
  }
  return byKind;
}
