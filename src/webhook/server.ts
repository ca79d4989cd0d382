import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import type { Logger } from "pino";
import { reviewConversion } from "./review.ts";
import type { ServingMaterial } from "./certificates.ts";

// The conversion webhook's HTTPS server: POST /convert takes a ConversionReview (review.ts); /healthz and /readyz
// for the kubelet. Plain node:https: one route does not need a framework.

/** A ConversionReview of a whole list can be large; more than this is refused (413) rather than buffered. */
const maxBodyBytes = 64 * 1024 * 1024;

interface WebhookServer {
  port: number;
  /** Serve another certificate from the next connection on (a renewal). */
  setMaterial(material: ServingMaterial): void;
  close(): Promise<void>;
}

export async function startWebhookServer(options: {
  material: ServingMaterial;
  port: number;
  host?: string | undefined;
  logger: Logger;
}): Promise<WebhookServer> {
  const { logger } = options;
  const json = (res: import("node:http").ServerResponse, status: number, body: unknown) => {
    const text = JSON.stringify(body);
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
    res.end(text);
  };
  const failure = (status: number, message: string) => ({
    kind: "Status",
    apiVersion: "v1",
    status: "Failure",
    message,
    code: status,
  });
  const server: Server = createServer(
    { cert: options.material.cert, key: options.material.key, minVersion: "TLSv1.2" },
    (req, res) => {
      const route = (req.url ?? "/").split("?")[0];
      if (req.method === "GET" && (route === "/healthz" || route === "/readyz")) {
        res.writeHead(200, { "content-type": "text/plain; charset=utf-8" });
        return res.end("ok\n");
      }
      if (route !== "/convert") return json(res, 404, failure(404, `no route ${route}; conversions go to /convert`));
      if (req.method !== "POST") return json(res, 405, failure(405, "POST a ConversionReview to /convert"));
      const chunks: Buffer[] = [];
      let size = 0;
      req.on("data", (c: Buffer) => {
        size += c.length;
        if (size > maxBodyBytes) {
          json(res, 413, failure(413, `a ConversionReview of more than ${maxBodyBytes} bytes is refused`));
          req.destroy();
        } else chunks.push(c);
      });
      req.on("end", () => {
        if (res.headersSent) return;
        let review: unknown;
        try {
          review = JSON.parse(Buffer.concat(chunks).toString("utf8"));
        } catch {
          return json(res, 400, failure(400, "the body is not JSON: expected a ConversionReview"));
        }
        try {
          const answer = reviewConversion(review);
          const result = (answer.body["response"] as { result?: { status?: string; message?: string } } | undefined)
            ?.result;
          if (result?.status === "Failure") logger.warn({ reason: result.message }, "conversion refused");
          json(res, answer.status, answer.body);
        } catch (err) {
          logger.error({ err }, "conversion failed");
          json(res, 500, failure(500, "conversion failed"));
        }
      });
    },
  );
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    setMaterial: (m) => server.setSecureContext({ cert: m.cert, key: m.key }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
