import { changesOf } from "./changes.ts";

// The served versions of the mds.dev kinds. v1beta1 is the storage version; v1alpha1 is still served, deprecated, and
// converted by the webhook (`mds webhook`). The v1beta1 schema is the v1alpha1 schema with the changes of changes.ts
// applied, so the two cannot drift apart in anything else.

export const legacyVersion = "v1alpha1";
export const storageVersion = "v1beta1";
export const servedVersions = [legacyVersion, storageVersion] as const;

type JsonSchema = { [key: string]: unknown };
type Rule = { rule: string; message: string };

function child(node: JsonSchema, name: string): JsonSchema | undefined {
  const props = node["properties"] as Record<string, JsonSchema> | undefined;
  return props?.[name];
}

// Another field's prose or a rule's message names a value as "type backup".
function renameTypeMentions(text: string, values: Readonly<Record<string, string>>): string {
  let out = text;
  for (const [old, beta] of Object.entries(values))
    out = out.replace(new RegExp(`\\btype ${old}\\b`, "g"), `type ${beta}`);
  return out;
}

// The field's own description lists its values as "backup: …", "pooled (default; …)", "direct, or …".
function renameListedValues(text: string, values: Readonly<Record<string, string>>): string {
  let out = text;
  for (const [old, beta] of Object.entries(values))
    out = out.replace(new RegExp(`(?<![\\w.'/-])${old}(?=:| \\(|, )`, "g"), beta);
  return out;
}

/**
 * The v1beta1 openAPIV3Schema of a kind from its v1alpha1 one (not modified): each changed enum gets its v1beta1
 * values and default, and the CEL rules and descriptions around it say the new values.
 */
export function v1beta1SchemaOf(kind: string, v1alpha1: JsonSchema): JsonSchema {
  const root = structuredClone(v1alpha1);
  for (const change of changesOf(kind)) {
    const field = change.path.at(-1)!;
    let parent: JsonSchema | undefined = root;
    for (const name of change.path.slice(0, -1)) parent = parent && child(parent, name);
    const leaf = parent && child(parent, field);
    if (!parent || !leaf) throw new Error(`${kind}: no field ${change.path.join(".")} in the v1alpha1 schema`);
    const rename = (v: unknown) => (typeof v === "string" ? (change.values[v] ?? v) : v);
    if (Array.isArray(leaf["enum"])) leaf["enum"] = leaf["enum"].map(rename);
    if (leaf["default"] !== undefined) leaf["default"] = rename(leaf["default"]);
    if (typeof leaf["description"] === "string")
      leaf["description"] = renameListedValues(leaf["description"], change.values);
    for (const sibling of Object.values((parent["properties"] as Record<string, JsonSchema> | undefined) ?? {})) {
      if (typeof sibling["description"] === "string")
        sibling["description"] = renameTypeMentions(sibling["description"], change.values);
    }
    const rules = parent["x-kubernetes-validations"] as Rule[] | undefined;
    if (rules) {
      parent["x-kubernetes-validations"] = rules.map((r) => {
        let rule = r.rule;
        for (const [old, beta] of Object.entries(change.values))
          rule = rule.replaceAll(`self.${field} == '${old}'`, `self.${field} == '${beta}'`);
        return { ...r, rule, message: renameTypeMentions(r.message, change.values) };
      });
    }
  }
  return root;
}
