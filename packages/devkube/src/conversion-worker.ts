import { request } from "node:https";
import { parentPort, workerData, type MessagePort } from "node:worker_threads";

// The thread that makes conversion webhook calls for conversion-webhook.ts, whose thread waits for the answer
// (devkube's object semantics are synchronous). One call at a time: the caller waits for each.

interface Call {
  url: string;
  /** The TLS name to check, when it differs from the URL's host (a Service reached at a mapped address). */
  servername?: string;
  ca?: string;
  body: string;
  timeoutMs: number;
}
export interface Answer {
  status?: number;
  body?: string;
  /** What failed before an answer, worded as Go's net/http client words it. */
  error?: string;
}

const { port, flag } = workerData as { port: MessagePort; flag: Int32Array };

function call(c: Call): Promise<Answer> {
  return new Promise((resolve) => {
    const url = new URL(c.url);
    const req = request(
      url,
      {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json" },
        timeout: c.timeoutMs,
        ...(c.ca ? { ca: c.ca } : {}),
        ...(c.servername ? { servername: c.servername } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (d: Buffer) => chunks.push(d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", (err) => resolve({ error: err.message }));
      },
    );
    req.on("timeout", () => req.destroy(new Error("context deadline exceeded")));
    req.on("error", (err: NodeJS.ErrnoException) => {
      const hostPort = `${url.hostname}:${url.port || "443"}`;
      if (err.code === "ECONNREFUSED") resolve({ error: `dial tcp ${hostPort}: connect: connection refused` });
      else if (err.code === "UNABLE_TO_VERIFY_LEAF_SIGNATURE" || err.code === "SELF_SIGNED_CERT_IN_CHAIN")
        resolve({ error: "tls: failed to verify certificate: x509: certificate signed by unknown authority" });
      else if (err.code === "ERR_TLS_CERT_ALTNAME_INVALID")
        resolve({ error: `tls: failed to verify certificate: x509: certificate is not valid for ${url.hostname}` });
      else resolve({ error: err.message });
    });
    req.end(c.body);
  });
}

parentPort!.on("message", (c: Call) => {
  void call(c).then((answer) => {
    port.postMessage(answer);
    Atomics.store(flag, 0, 1);
    Atomics.notify(flag, 0);
  });
});
