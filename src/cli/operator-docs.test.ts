import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { conditionReasons } from "../resources/conditions.ts";
import { operatorOptions } from "./operator-config.ts";

// The operator README is user documentation: every condition reason and every option must be in it.
const readme = readFileSync(new URL("../operator/README.md", import.meta.url), "utf8");

describe("operator README", () => {
  it.each(Object.keys(conditionReasons))("explains the reason %s", (reason) => {
    expect(readme).toContain(`| \`${reason}\` |`);
  });
  it.each(Object.values(operatorOptions).map((o) => [o.flag, o.env]))("documents --%s and %s", (flag, env) => {
    expect(readme).toContain(`| \`--${flag}\` | \`${env}\` |`);
  });
});
