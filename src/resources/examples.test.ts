import { describe, expect, it } from "vitest";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import type { z } from "zod";
import { parseCron } from "./backup-schedule/cron.ts";
import { convertObject } from "./conversion/convert.ts";
import { apiVersion } from "./group.ts";
import { kindModules } from "./index.ts";

// The examples a newcomer applies must stay valid against the schemas the CRDs come from. They are written in the
// storage version (v1beta1); the schemas are v1alpha1's, so each is converted first, as the webhook would.
const root = fileURLToPath(new URL("../../examples", import.meta.url));
const dirs = [
  "",
  "restore",
  "clone",
  "credentials",
  "backup",
  "backup-schedule",
  "gitops/flux/project",
  "gitops/flux/databases",
];
const files = dirs.flatMap((sub) =>
  readdirSync(join(root, sub))
    .filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml")
    .map((f) => join(sub, f)),
);
const schemas: Record<string, z.ZodType> = Object.fromEntries(
  kindModules.map((k) => [k.definition.kind, k.definition.whole]),
);

describe("examples", () => {
  it.each(files)("%s is valid", (file) => {
    const docs = parseAllDocuments(readFileSync(join(root, file), "utf8")).map((d) => d.toJS() as { kind: string });
    expect(docs.length).toBeGreaterThan(0);
    for (const doc of docs) {
      const schema = schemas[doc.kind];
      expect(schema, `unknown kind ${doc.kind}`).toBeDefined();
      expect((doc as { apiVersion?: string }).apiVersion).toBe("mds.dev/v1beta1");
      const result = schema!.safeParse(convertObject(doc as unknown as Record<string, unknown>, apiVersion));
      expect(result.error?.message).toBeUndefined();
      // A schedule's cron is checked by the operator, not the CRD: check it here.
      if (doc.kind === "BackupSchedule") parseCron((doc as { spec?: { schedule?: string } }).spec?.schedule ?? "");
    }
  });
});
