import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";

// `mds webhook` as its own process against a devkube (which must not host it on its own thread): listening on a
// free port of 127.0.0.1, addressed by URL. Resolves once it serves.

const bin = fileURLToPath(new URL("../../bin/mds.js", import.meta.url));

export interface WebhookProcess {
  url: string;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

/** The URL the CRDs should name; `start` runs the process (again, after a stop) at that URL. */
export async function webhookAddress(): Promise<{ url: string; start(kubeconfig: string): Promise<WebhookProcess> }> {
  const port = await freePort();
  const url = `https://127.0.0.1:${port}/convert`;
  return {
    url,
    async start(kubeconfig: string) {
      const args = ["webhook", "--url", url, "--port", String(port), "--host", "127.0.0.1"];
      const child: ChildProcess = spawn(
        process.execPath,
        [bin, ...args, "--kubeconfig", kubeconfig, "--namespace", "mds-system"],
        { stdio: ["ignore", "pipe", "inherit"] },
      );
      await new Promise<void>((resolve, reject) => {
        let out = "";
        child.stdout!.on("data", (d: Buffer) => {
          out += d.toString();
          if (out.includes("conversion webhook serving")) resolve();
        });
        child.once("exit", (code) => reject(new Error(`mds webhook exited with ${code}: ${out}`)));
      });
      return {
        url,
        async stop() {
          if (child.exitCode !== null) return;
          const exited = new Promise((r) => child.once("exit", r));
          child.kill();
          await exited;
        },
      };
    },
  };
}
