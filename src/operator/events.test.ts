import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { createFakeKube } from "../../test/support/fake-kube.ts";
import { EventType } from "../kube/types.ts";
import { createEventRecorder } from "./events.ts";

const obj = (name: string) => ({
  apiVersion: "mds.dev/v1alpha1",
  kind: "Database",
  metadata: { name, namespace: "default", uid: `uid-${name}` },
});
const settle = () => new Promise((r) => setTimeout(r, 0));

describe("event recorder", () => {
  it("does not repeat an Event within the window, and its memory stays bounded however many objects it saw", async () => {
    const kube = createFakeKube();
    const events = createEventRecorder(kube, pino({ level: "silent" }), { maxRemembered: 50 });
    events.record(obj("a"), "Warning", "ApiUnavailable", "down");
    events.record(obj("a"), "Warning", "ApiUnavailable", "down");
    await settle();
    expect((await kube.list(EventType, { namespace: "default" })).items).toHaveLength(1);
    // Far more objects than the bound: recording keeps working (nothing throws, each object gets its Event).
    for (let i = 0; i < 500; i++) events.record(obj(`db-${i}`), "Normal", "Created", "created");
    await settle();
    expect((await kube.list(EventType, { namespace: "default" })).items).toHaveLength(501);
  });
});
