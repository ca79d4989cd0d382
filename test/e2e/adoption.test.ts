import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SecretType, type KubeObject, type Secret } from "../../src/kube/types.ts";
import { ConnectionType, DatabaseRestoreType, DatabaseType } from "../../src/resources/types.ts";
import { counterparts, eventually, manifests, startStack, type Stack } from "./helpers.ts";

// Importing existing databases: ObserveOnly first (status and drift, nothing written remotely, no Secret), then Full
// (adopted, a Secret, still no rename unless displayName asks). Adoption of another project's database is refused.
// The annotations users expect (poll-interval, reconcile-requested-at) and the Stalled condition, with the real kubectl.

type Cond = { type: string; status: string; reason: string; message: string };
type Status = {
  id?: string;
  drift?: { field: string; desired: string; actual: string }[];
  lastHandledReconcileAt?: string;
  conditions?: Cond[];
};

describe.each(counterparts)("adoption against %s", (counterpart) => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ api: counterpart });
    await stack.startOperator();
  }, 120_000);
  afterAll(async () => {
    await stack?.stop();
  });

  const api = async (method: string, path: string, body?: object) => {
    const res = await fetch(`${stack.service.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${stack.service.token}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return (await res.json()) as { data: { id: string; name: string; status: string; connections: { id: string }[] } };
  };
  const resource = async (name: string) => stack.kube.get<KubeObject>(DatabaseType, stack.namespace, name);
  const status = async (name: string) => (await resource(name))?.["status"] as Status | undefined;
  const waitFor = <T>(what: string, check: () => Promise<T>) => eventually(check, { what, timeoutMs: 60_000 });
  const cond = (name: string, type: string, want: Partial<Cond>) =>
    waitFor(`${name} ${type} ${JSON.stringify(want)}`, async () => {
      const c = (await status(name))?.conditions?.find((x) => x.type === type);
      for (const [k, v] of Object.entries(want))
        if (c?.[k as keyof Cond] !== v) throw new Error(`${name} ${type}: ${JSON.stringify(c)}`);
      return c!;
    });
  const database = (name: string, spec: object, annotations?: Record<string, string>) => ({
    apiVersion: "mds.dev/v1alpha1",
    kind: "Database",
    metadata: { name, namespace: stack.namespace, ...(annotations === undefined ? {} : { annotations }) },
    spec,
  });
  const patch = (name: string, body: object) =>
    stack.kubectl(["patch", "databases.mds.dev", name, "--type=merge", "-p", JSON.stringify(body)]);

  it("observes first (drift, no write, no Secret), adopts on Full without renaming, refuses another project's database", async () => {
    const fleet = (
      await api("POST", "/v1/projects", { name: `fleet-${counterpart}`, region: "us-east-1", createDatabase: false })
    ).data;
    const other = (
      await api("POST", "/v1/projects", { name: `other-${counterpart}`, region: "us-east-1", createDatabase: false })
    ).data;
    const legacy = (await api("POST", "/v1/databases", { projectId: fleet.id, name: "legacy", region: "us-east-1" }))
      .data;
    await waitFor("legacy ready", async () =>
      expect((await api("GET", `/v1/databases/${legacy.id}`)).data.status).toBe("ready"),
    );
    const loginsBefore = (await api("GET", `/v1/databases/${legacy.id}`)).data.connections.map((c) => c.id).sort();

    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests(
        database("legacy", {
          projectId: fleet.id,
          externalId: legacy.id,
          managementPolicy: "ObserveOnly",
          displayName: "renamed",
          connectionSecret: { name: "legacy-db" },
          deletionPolicy: "Delete",
        }),
        database("nothing-to-observe", { projectId: fleet.id, managementPolicy: "ObserveOnly" }),
        database("wrong-project", { projectId: other.id, externalId: legacy.id }),
      ),
    );

    // ObserveOnly: mirrored and compared, nothing written remotely, no Secret, no finalizer.
    await cond("legacy", "Synced", { status: "True", reason: "ObserveOnly" });
    await cond("legacy", "Ready", { status: "True" });
    expect((await status("legacy"))?.drift).toEqual([{ field: "displayName", desired: "renamed", actual: "legacy" }]);
    expect((await status("legacy"))?.id).toBe(legacy.id);
    const events = await stack.kubectl([
      "get",
      "events",
      "--field-selector",
      "involvedObject.name=legacy,reason=Drifted",
      "-o",
      "name",
    ]);
    expect(events.trim()).not.toBe("");
    expect((await resource("legacy"))?.metadata.finalizers ?? []).toEqual([]);
    expect(await stack.kube.get<Secret>(SecretType, stack.namespace, "legacy-db")).toBeUndefined();
    const observed = (await api("GET", `/v1/databases/${legacy.id}`)).data;
    expect(observed.name).toBe("legacy");
    expect(observed.connections.map((c) => c.id).sort()).toEqual(loginsBefore);

    // Nor through other resources: a Connection to it and a restore into it are refused, nothing minted or restored.
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests(
        {
          apiVersion: "mds.dev/v1alpha1",
          kind: "Connection",
          metadata: { name: "peek", namespace: stack.namespace },
          spec: { databaseRef: { name: "legacy" } },
        },
        {
          apiVersion: "mds.dev/v1alpha1",
          kind: "DatabaseRestore",
          metadata: { name: "overwrite", namespace: stack.namespace },
          spec: {
            target: { databaseRef: { name: "legacy" } },
            source: { databaseRef: { name: "legacy" }, latest: true },
          },
        },
      ),
    );
    for (const [type, name] of [
      [ConnectionType, "peek"],
      [DatabaseRestoreType, "overwrite"],
    ] as const) {
      await waitFor(`${name} refused`, async () => {
        const c = (
          (await stack.kube.get<KubeObject>(type, stack.namespace, name))?.["status"] as Status | undefined
        )?.conditions?.find((x) => x.type === "Stalled");
        expect([c?.status, c?.reason]).toEqual(["True", "ReferenceNotAllowed"]);
      });
    }
    expect((await api("GET", `/v1/databases/${legacy.id}`)).data.connections.map((c) => c.id).sort()).toEqual(
      loginsBefore,
    );
    await stack.kubectl([
      "delete",
      "connections.mds.dev/peek",
      "databaserestores.mds.dev/overwrite",
      "--wait=true",
      "--timeout=30s",
    ]);

    // ObserveOnly of nothing, and adoption of a database of another project: Stalled, nothing written.
    const nothing = await cond("nothing-to-observe", "Stalled", { status: "True", reason: "InvalidSpec" });
    expect(nothing.message).toContain("needs spec.externalId");
    const refused = await cond("wrong-project", "Stalled", { status: "True", reason: "AdoptionRefused" });
    expect(refused.message).toContain(`belongs to project "${fleet.id}"`);
    // `kubectl wait` tells a stuck resource from a slow one.
    await stack.kubectl(["wait", "--for=condition=Stalled", "databases.mds.dev/wrong-project", "--timeout=5s"]);
    await stack.kubectl(["delete", "databases.mds.dev/wrong-project", "--wait=true", "--timeout=30s"]);
    expect((await api("GET", `/v1/databases/${legacy.id}`)).data.id).toBe(legacy.id);

    // An id annotation written by hand is no adoption: refused, and deleting the resource deletes nothing remote.
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests(
        database("forged", { projectId: fleet.id, deletionPolicy: "Delete" }, { "mds.dev/external-id": legacy.id }),
      ),
    );
    const forged = await cond("forged", "Stalled", { status: "True", reason: "AdoptionRefused" });
    expect(forged.message).toContain("did not create");
    await stack.kubectl(["delete", "databases.mds.dev/forged", "--wait=true", "--timeout=30s"]);
    expect((await api("GET", `/v1/databases/${legacy.id}`)).data.name).toBe("legacy");

    // Full: adopted, with a Secret, and without the rename the spec no longer asks for.
    await patch("legacy", { spec: { managementPolicy: "Full", displayName: null } });
    await stack.kubectl(["wait", "--for=condition=Ready", "databases.mds.dev/legacy", "--timeout=60s"]);
    await waitFor("legacy-db Secret", async () =>
      expect(await stack.kube.get<Secret>(SecretType, stack.namespace, "legacy-db")).toBeDefined(),
    );
    await waitFor("drift cleared", async () => expect((await status("legacy"))?.drift).toBeUndefined());
    expect((await api("GET", `/v1/databases/${legacy.id}`)).data.name).toBe("legacy");
    expect((await resource("legacy"))?.metadata.finalizers).toContain("mds.dev/finalizer");
    // displayName renames, once asked.
    await patch("legacy", { spec: { displayName: "renamed" } });
    await waitFor("renamed", async () =>
      expect((await api("GET", `/v1/databases/${legacy.id}`)).data.name).toBe("renamed"),
    );

    // A bad poll interval says what to fix and stops nothing (the default applies); a good one clears it; a
    // reconcile request is echoed.
    await stack.kubectl(["annotate", "databases.mds.dev/legacy", "mds.dev/poll-interval=soon"]);
    const bad = await cond("legacy", "Synced", { status: "False", reason: "InvalidSpec" });
    expect(bad.message).toContain("mds.dev/poll-interval");
    expect((await status("legacy"))?.conditions?.find((c) => c.type === "Ready")?.status).toBe("True");
    await stack.kubectl(["annotate", "databases.mds.dev/legacy", "mds.dev/poll-interval=30s", "--overwrite"]);
    await stack.kubectl([
      "annotate",
      "databases.mds.dev/legacy",
      "mds.dev/reconcile-requested-at=2026-11-24T12:00:00Z",
    ]);
    await cond("legacy", "Synced", { status: "True" });
    await waitFor("reconcile request handled", async () =>
      expect((await status("legacy"))?.lastHandledReconcileAt).toBe("2026-11-24T12:00:00Z"),
    );
    await stack.kubectl(["wait", "--for=condition=Ready", "databases.mds.dev/legacy", "--timeout=30s"]);
  }, 180_000);
});
