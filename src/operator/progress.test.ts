import { describe, expect, it } from "vitest";
import { jsonEqual, setCondition, type Condition } from "./conditions.ts";
import { withProgress, type ProgressInput } from "./progress.ts";
import { stallingReasons } from "../resources/index.ts";

const t0 = new Date("2026-01-01T00:00:00Z");
const t1 = new Date("2026-01-01T01:00:00Z");
const base: ProgressInput = { generation: 2, deleting: false, rotating: false, stalling: new Set(stallingReasons()) };

function conds(ready?: [string, string], synced?: [string, string]): Condition[] {
  let list: Condition[] = [];
  if (ready)
    list = setCondition(
      list,
      {
        type: "Ready",
        status: ready[0] as "True",
        reason: ready[1],
        message: `ready ${ready[1]}`,
        observedGeneration: 2,
      },
      t0,
    );
  if (synced)
    list = setCondition(
      list,
      {
        type: "Synced",
        status: synced[0] as "True",
        reason: synced[1],
        message: `synced ${synced[1]}`,
        observedGeneration: 2,
      },
      t0,
    );
  return list;
}
const pick = (list: Condition[], type: string) => {
  const c = list.find((x) => x.type === type);
  return c === undefined ? undefined : `${c.status} ${c.reason}`;
};

describe("withProgress: kstatus's Reconciling and Stalled from Ready, Synced, deletion and rotation", () => {
  it.each([
    ["creating", conds(["False", "Creating"], ["True", "ReconcileSuccess"]), base, "True Creating", undefined],
    [
      "provisioning",
      conds(["False", "Provisioning"], ["True", "ReconcileSuccess"]),
      base,
      "True Provisioning",
      undefined,
    ],
    ["restoring", conds(["False", "Restoring"], ["True", "ReconcileSuccess"]), base, "True Restoring", undefined],
    [
      "waiting for its project",
      conds(["False", "ProjectNotReady"], ["False", "ProjectNotReady"]),
      base,
      "True ProjectNotReady",
      undefined,
    ],
    [
      "waiting for credentials",
      conds(["False", "CredentialsMissing"], ["False", "CredentialsMissing"]),
      base,
      "True CredentialsMissing",
      undefined,
    ],
    [
      "an outage while provisioning",
      conds(["False", "Provisioning"], ["False", "ApiUnavailable"]),
      base,
      "True ApiUnavailable",
      undefined,
    ],
    ["ready", conds(["True", "Available"], ["True", "ReconcileSuccess"]), base, "False Available", undefined],
    [
      "ready, an outage on resync",
      conds(["True", "Available"], ["False", "ApiUnavailable"]),
      base,
      "False Available",
      undefined,
    ],
    [
      "rotating",
      conds(["True", "Available"], ["True", "ReconcileSuccess"]),
      { ...base, rotating: true },
      "True Rotating",
      undefined,
    ],
    ["deleting", conds(["True", "Available"]), { ...base, deleting: true }, "True Deleting", undefined],
    [
      "deleting, waiting for databases",
      conds(["False", "WaitingForDatabases"]),
      { ...base, deleting: true },
      "True WaitingForDatabases",
      undefined,
    ],
    ["paused", conds(["False", "Creating"], ["False", "ReconcilePaused"]), base, "False ReconcilePaused", undefined],
    [
      "remote failure",
      conds(["False", "RemoteFailure"], ["True", "ReconcileSuccess"]),
      base,
      "False RemoteFailure",
      "True RemoteFailure",
    ],
    [
      "token refused",
      conds(["True", "Available"], ["False", "CredentialsInvalid"]),
      base,
      "False CredentialsInvalid",
      "True CredentialsInvalid",
    ],
    [
      "a terminal error of a new kind",
      conds(["False", "Creating"], ["False", "NotSupported"]),
      { ...base, terminal: { reason: "NotSupported", message: "m" } },
      "False NotSupported",
      "True NotSupported",
    ],
    ["a first write without Ready", [], base, "True Progressing", undefined],
  ] as const)("%s", (_name, list, input, reconciling, stalled) => {
    const out = withProgress([...list], input, t0);
    expect(pick(out, "Reconciling")).toBe(reconciling);
    expect(pick(out, "Stalled")).toBe(stalled);
    expect(
      out.filter((c) => (c.type === "Reconciling" || c.type === "Stalled") && c.status === "True").length,
    ).toBeLessThanOrEqual(1);
    expect(out.find((c) => c.type === "Reconciling")?.observedGeneration).toBe(2);
  });

  it("writes nothing new when nothing changed: same list an hour later (no timestamp churn)", () => {
    for (const list of [
      conds(["True", "Available"], ["True", "ReconcileSuccess"]),
      conds(["False", "Provisioning"], ["True", "ReconcileSuccess"]),
      conds(["False", "RemoteFailure"]),
    ]) {
      const first = withProgress(list, base, t0);
      expect(jsonEqual(withProgress(first, base, t1), first)).toBe(true);
    }
  });

  it("clears Stalled (False) once recovered, and keeps it absent on a resource that never stalled", () => {
    const stalled = withProgress(conds(["False", "RemoteFailure"]), base, t0);
    const recovered = withProgress(
      setCondition(
        stalled,
        { type: "Ready", status: "True", reason: "Available", message: "", observedGeneration: 2 },
        t1,
      ),
      base,
      t1,
    );
    expect(pick(recovered, "Stalled")).toBe("False ReconcileSuccess");
    expect(pick(recovered, "Reconciling")).toBe("False Available");
    expect(pick(withProgress(conds(["True", "Available"]), base, t0), "Stalled")).toBeUndefined();
  });

  it("replaces the CRD's AwaitingOperator placeholder with a real transition time", () => {
    const placeholder: Condition = {
      type: "Reconciling",
      status: "True",
      reason: "AwaitingOperator",
      message: "No operator has reconciled this resource yet",
      lastTransitionTime: "1970-01-01T00:00:00Z",
    };
    const out = withProgress([placeholder, ...conds(["False", "Creating"])], base, t1);
    expect(out.find((c) => c.type === "Reconciling")).toMatchObject({
      status: "True",
      reason: "Creating",
      lastTransitionTime: "2026-01-01T01:00:00Z",
    });
  });
});
