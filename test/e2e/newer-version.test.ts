import { readFile, readdir } from "node:fs/promises";
import path from "node:path";
import { Registry } from "prom-client";
import { afterAll, beforeAll, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { isKubeConflict } from "../../src/kube/errors.ts";
import type { Operator } from "../../src/operator/index.ts";
import { BackupScheduleType } from "../../src/resources/backup-schedule/schema.ts";
import { DatabaseBackupType } from "../../src/resources/database-backup/schema.ts";
import { DatabaseRestoreType, DatabaseType } from "../../src/resources/types.ts";
import { applyFleet, fleet, getObj, settled, snapshot, warnings, type Obj } from "./fleet.ts";
import { changingCrdsNote, counterparts, describeChangingCrds, eventually, startStack, type Stack } from "./helpers.ts";

// The rollback case seen from this version: a newer mds wrote status (conditions, fields and values this code has
// never heard of) under a newer CRD, then the operator was rolled back to this one. Every kind, against both
// counterparts: this operator reconciles them all, writes status, and everything stays Ready, with no Warning, no
// Secret rewritten, nothing created or deleted at the service, and every unknown part still there afterwards.

const crdsDir = path.resolve(import.meta.dirname, "../../crds");

/**
 * The CRDs a newer version might ship: today's, whose status takes any field and any value (what a newer schema
 * declares, this test cannot know). Spec is unchanged.
 */
async function newerCrds(): Promise<string> {
  const docs: string[] = [];
  for (const file of (await readdir(crdsDir)).filter((f) => f.endsWith(".yaml")).sort()) {
    const crd = parse(await readFile(path.join(crdsDir, file), "utf8")) as {
      spec: { versions: { schema: { openAPIV3Schema: { properties: Record<string, Record<string, unknown>> } } }[] };
    };
    for (const v of crd.spec.versions) {
      const props = v.schema.openAPIV3Schema.properties;
      props["status"] = {
        type: "object",
        "x-kubernetes-preserve-unknown-fields": true,
        ...(props["status"]?.["default"] === undefined ? {} : { default: props["status"]["default"] }),
      };
    }
    docs.push(stringify(crd));
  }
  return docs.join("---\n");
}

const newerConditions = [
  {
    type: "Hibernating",
    status: "False",
    reason: "Awake",
    message: "a newer version's condition",
    lastTransitionTime: "2026-12-01T00:00:00Z",
  },
  {
    type: "example.com/Audited",
    status: "True",
    reason: "AuditPassed",
    message: "",
    lastTransitionTime: "2026-12-01T00:00:00Z",
    observedGeneration: 1,
  },
];
const newerFields = {
  hibernation: { schedule: "0 22 * * *", windows: [{ from: "22:00", to: "06:00" }] },
  tier: "gold",
};

/** What the newer version adds to each object's status, besides newerConditions and newerFields. */
function newerStatusOf(kind: string, status: Record<string, unknown>): Record<string, unknown> {
  switch (kind) {
    case "Database":
      return {
        // A field inside a known object, and an entry of a known list with a phase this version lacks.
        ...(status["endpoints"] === undefined
          ? {}
          : { endpoints: { ...(status["endpoints"] as object), replica: { host: "r.example", port: 5433 } } }),
        restoreLedger: [
          ...((status["restoreLedger"] as unknown[] | undefined) ?? []),
          { key: "future/verify", phase: "Verified", checksum: "abc" },
        ],
      };
    case "DatabaseRestore":
      return { phase: "Verified", verifiedAt: "2026-12-01T00:00:00Z" };
    case "DatabaseBackup":
      return status["phase"] === "Succeeded" ? { phase: "Archived", archiveTier: "cold" } : {};
    default:
      return {};
  }
}

describeChangingCrds.each(counterparts)(
  "a newer version's status, read by this one, against %s" + changingCrdsNote,
  (counterpart) => {
    let stack: Stack;
    let operator: Operator | undefined;

    beforeAll(async () => {
      stack = await startStack({ api: counterpart });
      operator = await stack.startOperator();
      await applyFleet(stack, counterpart);
      await operator.stop();
      operator = undefined;
    }, 240_000);

    afterAll(async () => {
      await operator?.stop();
      // Today's CRDs back (on a real cluster they outlive the test).
      await stack?.kubectl(["apply", "-f", crdsDir]).catch(() => {});
      const leaks = stack === undefined ? "" : await stack.leaks();
      await stack?.stop();
      expect(leaks).toBe("");
    });

    it("reconciles every kind: Ready, no Warning, no Secret rewritten, the unknown parts kept", async () => {
      await stack.kubectl(["apply", "-f", "-"], await newerCrds());
      // The newer version's status writes.
      for (const { type, name } of fleet) {
        await eventually(
          async () => {
            const obj = (await getObj(stack, type, name))!;
            const status = obj.status ?? {};
            try {
              await stack.kube.patchStatus(type, stack.namespace, name, {
                metadata: { resourceVersion: obj.metadata.resourceVersion },
                status: {
                  ...newerFields,
                  ...newerStatusOf(type.kind, status),
                  conditions: [...(status.conditions ?? []), ...newerConditions],
                },
              });
            } catch (err) {
              if (isKubeConflict(err)) throw err;
              throw new Error(`cannot write the newer status of ${type.kind} ${name}`, { cause: err });
            }
          },
          { what: `${type.kind} ${name} written by the newer version` },
        );
      }
      const before = await snapshot(stack);
      const warningsBefore = await warnings(stack);
      for (const { type, name } of fleet)
        expect(JSON.stringify(before.status[`${type.kind}/${name}`])).toContain("tier");

      const metrics = new Registry();
      operator = await stack.startOperator({ metrics });
      // Every managed object through a status write of this version (the annotation's echo), every one-shot kind
      // through at least one reconcile.
      const requested = "newer-version-1";
      for (const { type, name, managed } of fleet)
        if (managed)
          await stack.kubectl([
            "annotate",
            "--overwrite",
            `${type.plural}.mds.dev/${name}`,
            `mds.dev/reconcile-requested-at=${requested}`,
          ]);
      for (const { type, name, managed } of fleet) {
        await eventually(
          async () => {
            const obj = await getObj(stack, type, name);
            if (managed) expect(obj?.status?.["lastHandledReconcileAt"]).toBe(requested);
            expect(settled(counterpart, type, obj)).toBe(true);
          },
          { what: `${type.kind} ${name} reconciled by this version`, timeoutMs: 60_000 },
        );
      }
      const reconciles = async (controller: string) => {
        const m = (await metrics.getMetricsAsJSON()).find((x) => x.name === "controller_runtime_reconcile_total");
        return (m?.values ?? []).filter((v) => v.labels["controller"] === controller).reduce((a, v) => a + v.value, 0);
      };
      for (const kind of [DatabaseRestoreType.kind, DatabaseBackupType.kind, BackupScheduleType.kind])
        await eventually(async () => expect(await reconciles(kind.toLowerCase())).toBeGreaterThan(0), {
          what: `a ${kind} reconcile`,
        });

      const after = await snapshot(stack);
      expect(after.remote).toEqual(before.remote);
      expect(after.secrets).toEqual(before.secrets);
      expect(await warnings(stack)).toEqual(warningsBefore);
      for (const { type, name } of fleet) {
        const obj = (await getObj(stack, type, name)) as Obj;
        const status = obj.status!;
        const where = `${type.kind}/${name}`;
        // The newer version's conditions, exactly as it wrote them, beside this version's.
        for (const c of newerConditions)
          expect({ where, condition: status.conditions?.find((x) => x.type === c.type) }).toEqual({
            where,
            condition: c,
          });
        expect({ where, fields: { hibernation: status["hibernation"], tier: status["tier"] } }).toEqual({
          where,
          fields: newerFields,
        });
        for (const [k, v] of Object.entries(newerStatusOf(type.kind, before.status[where] as Record<string, unknown>)))
          if (k !== "restoreLedger" && k !== "endpoints") expect({ where, k, v: status[k] }).toEqual({ where, k, v });
      }
      // What this version left alone: a restore and a backup in phases it does not know are never run again.
      const orders = (await getObj(stack, DatabaseType, "orders"))!.status!;
      expect(orders["restoreLedger"]).toContainEqual({ key: "future/verify", phase: "Verified", checksum: "abc" });
      expect((orders["endpoints"] as Record<string, unknown>)["replica"]).toEqual({ host: "r.example", port: 5433 });
      expect(after.status[`DatabaseRestore/rollback`]).toEqual(before.status[`DatabaseRestore/rollback`]);
      expect(after.status[`DatabaseBackup/nightly`]).toEqual(before.status[`DatabaseBackup/nightly`]);
    }, 240_000);
  },
);
