import { z } from "zod";
import { awaitingOperatorStatus } from "../conditions.ts";
import { mdsVersion } from "../../operator/build-info.ts";
import { legacyVersion, storageVersion, v1beta1SchemaOf } from "../conversion/versions.ts";
import { group, version } from "../group.ts";

// The CRDs are generated from the zod schemas so the operator's parsing and the apiserver's validation cannot
// disagree. z.toJSONSchema gives draft JSON Schema; Kubernetes wants a *structural* OpenAPI v3 subset, so the
// output is rewritten below (see "Specifying a structural schema" in the Kubernetes CRD docs).

type JsonSchema = { [key: string]: unknown };

export interface PrinterColumn {
  name: string;
  type: "string" | "integer" | "number" | "boolean" | "date";
  jsonPath: string;
  description: string;
  priority?: number;
}

export interface CrdDefinition {
  kind: string;
  plural: string;
  singular: string;
  shortNames: string[];
  spec: z.ZodType;
  status: z.ZodType;
  whole: z.ZodType;
  printerColumns: PrinterColumn[];
}

const maxSafe = Number.MAX_SAFE_INTEGER;

// Rewrites one node (and its children) into the structural subset Kubernetes accepts.
function toStructural(node: JsonSchema): JsonSchema {
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(node)) {
    switch (key) {
      case "$schema":
      case "propertyNames": // unsupported; keys are checked by zod in the operator instead
        continue;
      case "additionalProperties":
        // `false` is the default for structural schemas (unknown fields are pruned) and may not sit beside properties.
        if (value === false) continue;
        out[key] = toStructural(value as JsonSchema);
        continue;
      case "properties":
        out[key] = Object.fromEntries(
          Object.entries(value as Record<string, JsonSchema>).map(([k, v]) => [k, toStructural(v)]),
        );
        continue;
      case "items":
        out[key] = toStructural(value as JsonSchema);
        continue;
      case "const":
        out.enum = [value];
        continue;
      case "minimum":
        if (value === -maxSafe) continue;
        out[key] = value;
        continue;
      case "maximum":
        if (value === maxSafe) continue;
        out[key] = value;
        continue;
      default:
        out[key] = value;
    }
  }
  // RFC 3339 timestamps: the apiserver checks `format: date-time`; zod's long regex adds nothing but noise.
  if (out.format === "date-time") delete out.pattern;
  // A union of string enums (region: Region | "inherit") becomes one string enum: structural schemas forbid
  // types inside anyOf.
  if (Array.isArray(out.anyOf)) {
    const branches = out.anyOf as JsonSchema[];
    if (branches.every((b) => b.type === "string" && (Array.isArray(b.enum) || "const" in b))) {
      const values = branches.flatMap((b) => (Array.isArray(b.enum) ? (b.enum as unknown[]) : [b.const]));
      delete out.anyOf;
      out.type = "string";
      out.enum = [...new Set([...((out.enum as unknown[] | undefined) ?? []), ...values])];
    } else {
      throw new Error(
        `cannot generate CRD: a union that is not a string enum is not structural: ${JSON.stringify(out)}`,
      );
    }
  }
  if (out.type === "object" && out.properties === undefined && out.additionalProperties === undefined) {
    throw new Error(`cannot generate CRD: an object without properties would be pruned: ${JSON.stringify(out)}`);
  }
  return out;
}

export function openApiSchemaOf(schema: z.ZodType): JsonSchema {
  const json = z.toJSONSchema(schema, { io: "input", target: "openapi-3.0", unrepresentable: "throw" }) as JsonSchema;
  return toStructural(json);
}

/** The annotation on every CRD naming the mds release that generated it. */
export const crdVersionAnnotation = "mds.dev/version";

/** Where the API server reaches the conversion webhook (`mds webhook`): a Service, or a URL (devkube, tests). */
type WebhookClientConfig =
  | { service: { namespace: string; name: string; path: string; port: number }; caBundle?: string }
  | { url: string; caBundle?: string };

interface CrdOptions {
  /**
   * Serve v1beta1 (storage) and v1alpha1 (deprecated), converted by the webhook at this address. Without it the CRD
   * serves v1alpha1 alone, as 0.1.0 did.
   */
  conversion?: WebhookClientConfig | undefined;
}

function openApiV3SchemaOf(def: CrdDefinition): JsonSchema {
  return {
    type: "object",
    description: def.whole.description ?? def.kind,
    properties: {
      apiVersion: {
        type: "string",
        description: "APIVersion defines the versioned schema of this representation of an object.",
      },
      kind: { type: "string", description: "Kind is a string value representing the REST resource." },
      metadata: { type: "object" },
      spec: openApiSchemaOf(def.spec),
      // Served until the operator writes a status, so kstatus reads InProgress, never Current, before it has looked.
      status: { ...openApiSchemaOf(def.status), default: awaitingOperatorStatus },
    },
    required: ["spec"],
  };
}

function versionOf(def: CrdDefinition, name: string, schema: JsonSchema, storage: boolean): JsonSchema {
  return {
    name,
    served: true,
    storage,
    ...(name === legacyVersion && !storage
      ? {
          deprecated: true,
          deprecationWarning: `${group}/${legacyVersion} ${def.kind} is deprecated; use ${group}/${storageVersion} ${def.kind}`,
        }
      : {}),
    subresources: { status: {} },
    additionalPrinterColumns: def.printerColumns,
    schema: { openAPIV3Schema: schema },
  };
}

export function crdOf(def: CrdDefinition, options: CrdOptions = {}): JsonSchema {
  const v1alpha1 = openApiV3SchemaOf(def);
  // The storage version first: the API server orders versions by their names' priority whatever the order here, but
  // a client that takes the first listed (devkube's controllers, some tools) then reads what is stored, unconverted.
  const versions = options.conversion
    ? [
        versionOf(def, storageVersion, v1beta1SchemaOf(def.kind, v1alpha1), true),
        versionOf(def, legacyVersion, v1alpha1, false),
      ]
    : [versionOf(def, version, v1alpha1, true)];
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: {
      name: `${def.plural}.${group}`,
      labels: { "app.kubernetes.io/name": "mds-operator", "app.kubernetes.io/part-of": "mds" },
      // Which release wrote this CRD: after an operator rollback the CRDs stay newer than the operator, and this
      // says by how much (docs/upgrade.md).
      annotations: { [crdVersionAnnotation]: mdsVersion() },
    },
    spec: {
      group,
      names: {
        kind: def.kind,
        listKind: `${def.kind}List`,
        plural: def.plural,
        singular: def.singular,
        shortNames: def.shortNames,
        categories: ["mds"],
      },
      scope: "Namespaced",
      ...(options.conversion
        ? {
            conversion: {
              strategy: "Webhook",
              webhook: { conversionReviewVersions: ["v1"], clientConfig: options.conversion },
            },
          }
        : {}),
      versions,
    },
  };
}
