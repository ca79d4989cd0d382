import type { ChildProcess } from "node:child_process";
import type { MdsApi } from "../src/resources/remote/remote-api.ts";

// Serves the operator's API seam (MdsApi) to a child process over its IPC channel, so a benchmark keeps the fake
// service in its own process and the child's RSS holds only the operator. The child's side is in
// operator-rss-child.mjs (plain JavaScript). Errors cross as { code, status, message }, what the operator reads.

interface Call {
  id: number;
  method: keyof MdsApi;
  args: unknown[];
}

export function serveApi(child: ChildProcess, api: MdsApi): void {
  child.on("message", (message: Call) => {
    const method = api[message.method] as (...args: unknown[]) => Promise<unknown>;
    method.apply(api, message.args).then(
      (value) => child.send({ id: message.id, value }),
      (err: unknown) => {
        const e = err as { code?: unknown; status?: unknown; message?: unknown };
        child.send({
          id: message.id,
          error: {
            code: String(e.code ?? "internal"),
            status: Number(e.status ?? 500),
            message: String(e.message ?? err),
          },
        });
      },
    );
  });
}
