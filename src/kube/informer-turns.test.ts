import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { createFakeKube, unreachableKubeConfig } from "../../test/support/fake-kube.ts";
import { createInformer } from "./informer.ts";
import type { KubeObject, ResourceType } from "./types.ts";

// A full list of 10,000 objects (the start, or a relist after a watch expired) was packed and emitted in one go:
// seconds without a turn of the event loop, during which a leader could not renew its Lease. Counted in events
// emitted before a timer runs, not in milliseconds.

const ConfigMapType: ResourceType = {
  group: "",
  version: "v1",
  plural: "configmaps",
  kind: "ConfigMap",
  namespaced: true,
};
// Nothing listens there: the list goes through the fake client; the watch fails and backs off.
const kubeConfig = unreachableKubeConfig();

describe("informer and the event loop", () => {
  it("gives timers a turn while it emits a list of 10,000 objects", async () => {
    const n = 10_000;
    const kube = createFakeKube();
    for (let i = 0; i < n; i++) {
      kube.put(ConfigMapType, {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: `cm-${i}`, namespace: `team-${i % 100}` },
        data: { i: String(i) },
      } as KubeObject);
    }
    let emitted = 0;
    const informer = createInformer<KubeObject>({
      kubeConfig,
      client: kube,
      type: ConfigMapType,
      onEvent: () => void emitted++,
      logger: pino({ level: "silent" }),
    });
    let emittedWhenTimerRan = -1;
    const timerRan = new Promise<void>((resolve) =>
      setTimeout(() => {
        emittedWhenTimerRan = emitted;
        resolve();
      }, 0),
    );
    await Promise.all([informer.start(), timerRan]);
    await informer.stop();
    expect(emitted).toBe(n);
    expect(informer.list()).toHaveLength(n);
    // One slice (a page, 500) per turn: the timer runs long before the end (10,000 before).
    expect(emittedWhenTimerRan).toBeGreaterThanOrEqual(0);
    expect(emittedWhenTimerRan).toBeLessThan(n / 2);
  }, 60_000);
});
