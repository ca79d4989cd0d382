// Runs Argo CD health scripts under a real Lua 5.1 interpreter (the Lua Argo CD embeds), the way Argo CD does:
// the object is the global `obj` and the script's chunk returns { status, message }.
import { spawnSync } from "node:child_process";

export const luaInstallHint =
  "lua5.1 is not installed: the Argo CD health checks are tested with a real Lua 5.1 interpreter. " +
  "Install it with `npm run setup` (Debian/Ubuntu) or `apt-get install -y lua5.1`.";

/** Throws with the install hint when `lua5.1` cannot be run. */
export function requireLua(): void {
  const probe = spawnSync("lua5.1", ["-v"], { encoding: "utf8" });
  if (probe.error !== undefined || probe.status !== 0) throw new Error(luaInstallHint, { cause: probe.error });
}

/** A JSON value as a Lua 5.1 table constructor; JSON null becomes nil, as in Argo CD's conversion. */
export function toLua(value: unknown): string {
  if (value === null || value === undefined) return "nil";
  if (typeof value === "string") return quoteLua(value);
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  if (Array.isArray(value)) return `{ ${value.map(toLua).join(", ")} }`;
  if (typeof value === "object") {
    const fields = Object.entries(value).map(([k, v]) => `[${quoteLua(k)}] = ${toLua(v)}`);
    return `{ ${fields.join(", ")} }`;
  }
  throw new Error(`cannot convert a ${typeof value} to Lua`);
}

// Lua 5.1 knows no \u escapes: every byte outside printable ASCII is written as a decimal \ddd escape.
function quoteLua(text: string): string {
  let out = '"';
  for (const byte of Buffer.from(text, "utf8")) {
    const c = String.fromCharCode(byte);
    if (c === '"' || c === "\\") out += `\\${c}`;
    else if (byte >= 0x20 && byte < 0x7f) out += c;
    else out += `\\${byte.toString().padStart(3, "0")}`;
  }
  return `${out}"`;
}

export interface HealthStatus {
  status: string;
  message: string;
}

/** Evaluates the health script at `scriptPath` for `obj` and returns what Argo CD would show. */
export function runHealthScript(scriptPath: string, obj: unknown): HealthStatus {
  const program = [
    `obj = ${toLua(obj)}`,
    `local hs = dofile(${quoteLua(scriptPath)})`,
    `assert(type(hs) == "table", "the health script returned no table")`,
    `io.write(tostring(hs.status), "\\n", tostring(hs.message))`,
  ].join("\n");
  const result = spawnSync("lua5.1", ["-"], { input: program, encoding: "utf8" });
  if (result.error !== undefined) throw new Error(luaInstallHint, { cause: result.error });
  if (result.status !== 0) throw new Error(`lua5.1 failed on ${scriptPath}: ${result.stderr.trim()}`);
  const newline = result.stdout.indexOf("\n");
  return { status: result.stdout.slice(0, newline), message: result.stdout.slice(newline + 1) };
}
