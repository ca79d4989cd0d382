// The rooms of src/resources (README.md): kit/ is generic and knows no kind, no service and no wire contract;
// remote/ is the service's model and knows no kind (the kinds stand on it: a folder circle would tie them together).
import { readFileSync, readdirSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { kindModules } from "./index.ts";

const here = fileURLToPath(new URL(".", import.meta.url));
const kindFolders = [
  ...new Set(
    readdirSync(here, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name),
  ),
].filter((d) => !["kit", "remote", "conversion"].includes(d));

function importsOf(file: string): string[] {
  const text = readFileSync(join(here, file), "utf8");
  return [...text.matchAll(/^(?:import|export)[^;]*?from "(\.[^"]+)"/gms)].map((m) =>
    relative(here, join(here, dirname(file), m[1]!)),
  );
}

function sources(folder: string): string[] {
  return readdirSync(join(here, folder), { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts"))
    .map((f) => join(folder, f));
}

describe("the rooms of src/resources", () => {
  it("every folder beside kit/, remote/ and conversion/ is a registered kind's", () => {
    expect(kindFolders.length).toBe(kindModules.length);
  });

  it("kit/ imports no kind, nothing of remote/ and nothing outside src but node and libraries", () => {
    const broken = sources("kit").flatMap((f) =>
      importsOf(f)
        .filter(
          (i) =>
            kindFolders.some((k) => i.startsWith(`${k}/`)) ||
            i.startsWith("remote/") ||
            i.includes("contract/") ||
            i.includes("service/"),
        )
        .map((i) => `${f} → ${i}`),
    );
    expect(broken).toEqual([]);
  });

  it("remote/ imports no kind", () => {
    const broken = sources("remote").flatMap((f) =>
      importsOf(f)
        .filter((i) => kindFolders.some((k) => i.startsWith(`${k}/`)))
        .map((i) => `${f} → ${i}`),
    );
    expect(broken).toEqual([]);
  });

  it("a kind imports from another kind's folder only its typed reader, schema or index", () => {
    const broken = kindFolders.flatMap((kind) =>
      sources(kind).flatMap((f) =>
        importsOf(f)
          .filter((i) => {
            const other = kindFolders.find((k) => i.startsWith(`${k}/`));
            return other !== undefined && other !== kind && !/^[\w-]+\/(read|schema|index)\.ts$/.test(i);
          })
          .map((i) => `${f} → ${i}`),
      ),
    );
    expect(broken).toEqual([]);
  });
});
