// Every place the operator makes an Idempotency-Key (docs/design.md#keys-name-the-incarnation): through
// incarnationKeyOf (the object's uid is in it), or one of the documented keys that span re-creation on purpose. A
// new key made any other way fails here until it is one or the other.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const root = path.resolve(import.meta.dirname, "../..");
// The operator's code: not the service (which stores keys) nor the client (which sends what it is given).
const operatorDirs = ["src/operator", "src/resources", "src/kube", "src/cli"];

function sources(dir: string): string[] {
  return readdirSync(path.join(root, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(".ts") && !e.name.endsWith(".test.ts"))
    .map((e) => path.relative(root, path.join(e.parentPath, e.name)));
}
const callers = (fn: string) =>
  operatorDirs
    .flatMap(sources)
    .filter((f) => f !== "src/operator/identity.ts" && readFileSync(path.join(root, f), "utf8").includes(`${fn}(`))
    .sort();

describe("the Idempotency-Keys the operator sends", () => {
  it("name the incarnation: every create of a Project, Database, branch and connection (mint, rotation, Connection)", () => {
    expect(callers("incarnationKeyOf")).toEqual([
      "src/operator/secret/recovery.ts", // a lost Secret's mint, a rotation's mint
      "src/resources/connection/external.ts", // a Connection's mint
      "src/resources/database/branch.ts", // spec.branch's branch
      "src/resources/database/external.ts", // the database (and its replay for lost credentials)
      "src/resources/project/external.ts", // the project (and its replay)
    ]);
  });

  it("made otherwise only by the documented exceptions, which name the target's remote id", () => {
    expect(callers("idempotencyKeyOf")).toEqual([
      // One backup per database and key: spec.idempotencyKey (a re-applied resource gets the same backup on
      // purpose), by default the DatabaseBackup's uid.
      "src/resources/database-backup/operation.ts",
      // One restore per target and key: spec.idempotencyKey spans re-applied DatabaseRestores on purpose.
      "src/resources/database-restore/operation.ts",
    ]);
  });
});
