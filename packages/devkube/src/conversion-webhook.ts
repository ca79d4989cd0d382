import { randomUUID } from "node:crypto";
import { MessageChannel, receiveMessageOnPort, Worker } from "node:worker_threads";
import { ApiError } from "./errors.ts";
import type { Answer } from "./conversion-worker.ts";
import { isObj, type Obj } from "./types.ts";

// CRD conversion webhooks, called as kube-apiserver calls them: a ConversionReview v1 POSTed to the CRD's
// clientConfig (a url, or a Service: reached at the address `services` maps it to, its certificate checked for
// <name>.<namespace>.svc), verified against caBundle, 30 s timeout; the answer checked (kind, uid, result, count)
// and any failure worded as kube-apiserver words it ("conversion webhook for <group/version, Kind=K> failed: …",
// a 500 without a reason, which kubectl prints as "Error from server: …").
//
// devkube's object semantics are synchronous (api.ts), so the call is made on a worker thread while this one waits.
// The webhook must therefore not run on devkube's own thread: run it as its own process, as a cluster does.

const timeoutMs = 30_000;

interface WebhookConversion {
  clientConfig: Obj;
  crdName: string;
}

/** Maps "namespace/name" of a Service to the "host:port" devkube reaches it at (devkube runs no pods). */
export type ServiceAddresses = Record<string, string>;

export class ConversionWebhooks {
  private worker: Worker | undefined;
  private readonly flag = new Int32Array(new SharedArrayBuffer(4));
  private readonly channel = new MessageChannel();
  private readonly services: ServiceAddresses;

  constructor(services: ServiceAddresses = {}) {
    this.services = services;
  }

  private start(): Worker {
    if (!this.worker) {
      this.worker = new Worker(new URL("./conversion-worker.ts", import.meta.url), {
        workerData: { port: this.channel.port2, flag: this.flag },
        transferList: [this.channel.port2],
      });
      this.worker.unref();
    }
    return this.worker;
  }

  async stop(): Promise<void> {
    this.channel.port1.close();
    await this.worker?.terminate();
    this.worker = undefined;
  }

  /** `objects` (all of one kind and version) in `desiredAPIVersion`, or an ApiError as kube-apiserver answers. */
  convert(conversion: WebhookConversion, objects: Obj[], desiredAPIVersion: string): Obj[] {
    if (objects.length === 0) return [];
    const first = objects[0]!;
    const [g, v] = String(first["apiVersion"]).includes("/") ? String(first["apiVersion"]).split("/") : ["", ""];
    const gvk = `${g}/${v}, Kind=${String(first["kind"])}`;
    const fail = (why: string) => new ApiError(500, "", `conversion webhook for ${gvk} failed: ${why}`);
    const target = this.targetOf(conversion.clientConfig);
    if ("error" in target) throw fail(target.error);
    const { display, ...call } = target;
    const uid = randomUUID();
    const body = JSON.stringify({
      kind: "ConversionReview",
      apiVersion: "apiextensions.k8s.io/v1",
      request: { uid, desiredAPIVersion, objects },
    });
    const caBundle = conversion.clientConfig["caBundle"];
    const ca = typeof caBundle === "string" && caBundle ? Buffer.from(caBundle, "base64").toString("utf8") : undefined;
    Atomics.store(this.flag, 0, 0);
    this.start().postMessage({ ...call, body, timeoutMs, ...(ca ? { ca } : {}) });
    Atomics.wait(this.flag, 0, 0, timeoutMs + 5_000);
    const answer = receiveMessageOnPort(this.channel.port1)?.message as Answer | undefined;
    const post = `Post "${display}?timeout=30s"`;
    if (!answer) throw fail(`${post}: context deadline exceeded`);
    if (answer.error !== undefined) throw fail(`${post}: ${answer.error}`);
    let review: unknown;
    try {
      review = JSON.parse(answer.body ?? "");
    } catch {
      throw fail(`the server responded with the status code ${answer.status} but did not return more information`);
    }
    if (answer.status !== 200) {
      const message = isObj(review) && typeof review["message"] === "string" ? review["message"] : "";
      throw fail(message || `the server responded with the status code ${answer.status}`);
    }
    if (!isObj(review) || review["kind"] !== "ConversionReview" || review["apiVersion"] !== "apiextensions.k8s.io/v1")
      throw fail(
        `expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got ${isObj(review) ? `${String(review["apiVersion"])}, Kind=${String(review["kind"])}` : "/, Kind="}`,
      );
    const response = review["response"];
    if (!isObj(response)) throw fail("no response provided");
    if (response["uid"] !== uid) throw fail(`expected response.uid="${uid}", got "${String(response["uid"])}"`);
    const result = isObj(response["result"]) ? response["result"] : {};
    if (result["status"] !== "Success") {
      const message = typeof result["message"] === "string" ? result["message"] : "";
      throw fail(message || `response.result.status was '${String(result["status"] ?? "")}', not 'Success'`);
    }
    const converted = Array.isArray(response["convertedObjects"]) ? response["convertedObjects"] : [];
    if (converted.length !== objects.length)
      throw fail(`returned ${converted.length} objects, expected ${objects.length}`);
    return converted.map((o, i) => {
      if (!isObj(o) || o["apiVersion"] !== desiredAPIVersion)
        throw fail(`invalid converted object at index ${i}: invalid apiVersion, expected ${desiredAPIVersion}`);
      return o;
    });
  }

  private targetOf(config: Obj): { url: string; servername?: string; display: string } | { error: string } {
    if (typeof config["url"] === "string") return { url: config["url"], display: config["url"] };
    const service = isObj(config["service"]) ? config["service"] : {};
    const name = String(service["name"] ?? "");
    const namespace = String(service["namespace"] ?? "");
    const port = Number(service["port"] ?? 443);
    const path = typeof service["path"] === "string" ? service["path"] : "";
    const host = `${name}.${namespace}.svc`;
    const url = `https://${host}:${port}${path}`;
    const address = this.services[`${namespace}/${name}`];
    if (!address) return { error: `Post "${url}?timeout=30s": service "${name}" not found` };
    return { url: `https://${address}${path}`, servername: host, display: url };
  }
}
