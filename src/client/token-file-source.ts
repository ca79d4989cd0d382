import { readFile, stat } from "node:fs/promises";
import { UnauthorizedError } from "./errors.ts";
import type { TokenSource } from "./token-source.ts";

/**
 * A token read from a file and re-read whenever the file changes, so a rotated Kubernetes
 * Secret takes effect without a restart. Kubernetes swaps the `..data` symlink of a mounted
 * Secret; `stat` follows it, so the inode, size or mtime changes. A 401 forces a re-read too.
 */
export function tokenFileSource(path: string): TokenSource {
  let cached: { token: string; version: string } | undefined;

  async function load(force: boolean): Promise<string> {
    let version: string;
    try {
      const info = await stat(path);
      version = `${info.ino}:${info.size}:${info.mtimeMs}:${info.ctimeMs}`;
      if (!force && cached !== undefined && cached.version === version) return cached.token;
      const token = (await readFile(path, "utf8")).trim();
      if (token === "") throw new Error("the file is empty");
      cached = { token, version };
      return token;
    } catch (error) {
      // The token is never in these messages: only the path and the reason.
      const reason =
        error instanceof Error && "code" in error
          ? String(error.code)
          : error instanceof Error
            ? error.message
            : "unreadable";
      throw new UnauthorizedError(`cannot read token file "${path}": ${reason}`, {
        code: "unauthorized",
        retryable: true,
        cause: error,
      });
    }
  }

  return {
    identity: `token-file:${path}`,
    getToken: () => load(false),
    async renew(rejected) {
      const token = await load(true);
      return token !== rejected;
    },
  };
}
