import { readFileSync } from "node:fs";
import { parseAllDocuments, stringify } from "yaml";
import { convertObject } from "../../src/resources/conversion/convert.ts";

// An example of examples/ (written in the storage version) as a client of another served version would write it,
// converted as the webhook converts: for tests that apply what 0.1.0's users applied (v1alpha1).

export function exampleIn(file: string, apiVersion = "mds.dev/v1alpha1"): string {
  return parseAllDocuments(readFileSync(file, "utf8"))
    .map((d) => d.toJS() as Record<string, unknown> | null)
    .filter((o): o is Record<string, unknown> => o !== null)
    .map((o) => stringify(String(o["apiVersion"]).startsWith("mds.dev/") ? convertObject(o, apiVersion) : o))
    .join("---\n");
}
