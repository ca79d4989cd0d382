import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import type { KubeClient } from "../kube/client.ts";
import { EventType, type KubeObject } from "../kube/types.ts";
import { isoSeconds } from "./time.ts";

export interface EventRecorder {
  /** Records what happened to `obj`. Fire and forget: an Event that cannot be written is logged, never thrown. */
  record(obj: KubeObject, type: "Normal" | "Warning", reason: string, message: string): void;
}

/**
 * core/v1 Events (what `kubectl describe` shows). The same reason and message for the same object is not repeated
 * within `repeatWindowMs`, so a failing object retried with backoff does not flood the namespace.
 */
export function createEventRecorder(
  kube: KubeClient,
  logger: Logger,
  options: { instance?: string; repeatWindowMs?: number; maxRemembered?: number } = {},
): EventRecorder {
  const repeatWindowMs = options.repeatWindowMs ?? 10 * 60_000;
  const last = new Map<string, { text: string; at: number }>();
  // Bounded whatever the number of objects: entries past the window no longer suppress anything; if the window
  // itself holds more than the bound (a mass failure), forget everything: at worst one repeated Event each.
  const maxRemembered = options.maxRemembered ?? 2_000;
  function forgetOlderThan(cutoff: number) {
    for (const [key, entry] of last) if (entry.at <= cutoff) last.delete(key);
    if (last.size > maxRemembered) last.clear();
  }
  return {
    record(obj, type, reason, message) {
      const uid = obj.metadata.uid ?? `${obj.metadata.namespace}/${obj.metadata.name}`;
      const text = `${type}:${reason}:${message}`;
      const now = Date.now();
      const prev = last.get(uid);
      if (prev !== undefined && prev.text === text && now - prev.at < repeatWindowMs) return;
      last.set(uid, { text, at: now });
      if (last.size > maxRemembered) forgetOlderThan(now - repeatWindowMs);
      const time = isoSeconds(now);
      const event = {
        apiVersion: "v1",
        kind: "Event",
        metadata: {
          name: `${obj.metadata.name}.${randomBytes(8).toString("hex")}`,
          namespace: obj.metadata.namespace ?? "default",
        },
        involvedObject: {
          apiVersion: obj.apiVersion,
          kind: obj.kind,
          name: obj.metadata.name,
          namespace: obj.metadata.namespace,
          uid: obj.metadata.uid,
          resourceVersion: obj.metadata.resourceVersion,
        },
        reason,
        message,
        type,
        source: { component: "mds-operator" },
        reportingComponent: "mds-operator",
        reportingInstance: options.instance ?? "mds-operator",
        firstTimestamp: time,
        lastTimestamp: time,
        count: 1,
      };
      kube.create(EventType, event).catch((err: unknown) => logger.debug({ err }, "Could not record Event"));
    },
  };
}
