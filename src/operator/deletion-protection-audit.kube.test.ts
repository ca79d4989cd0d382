import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { createKubeClient, type KubeClient } from "../kube/client.ts";
import { parseKubeConfig } from "../kube/kubeconfig.ts";
import type { KubeObject } from "../kube/types.ts";
import { startDevkube, type Devkube } from "@mds/devkube";
import { applyDeletionProtectionPolicy } from "../../dev/stack.ts";
import { KubeConfig } from "@kubernetes/client-node";
import { runKubectl } from "../../test/support/kubectl.ts";
import { createDeletionProtectionAudit, deletionProtectionEnforcement } from "./deletion-protection-audit.ts";

// On a cluster without deploy/base's policy, spec.deletionProtection is stored and enforced by nothing: the audit
// warns each protected object once. Against devkube's real admissionregistration/v1 objects.
describe("deletion protection audit", () => {
  let dir = "";
  let kube: Devkube;
  let client: KubeClient;
  const recorded: Array<{ name: string; type: string; reason: string; message: string }> = [];
  const events = {
    record: (obj: KubeObject, type: string, reason: string, message: string) =>
      void recorded.push({ name: obj.metadata.name, type, reason, message }),
  };
  const object = (name: string, deletionProtection: boolean, uid = name) =>
    ({ metadata: { name, namespace: "default", uid }, spec: { deletionProtection } }) as KubeObject;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "mds-dp-audit-"));
    kube = await startDevkube({ dir: join(dir, "kube") });
    client = createKubeClient(parseKubeConfig(kube.kubeconfig));
  });
  afterAll(async () => {
    await kube?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it("warns each protected object once while no policy enforces the field, and nothing once it does", async () => {
    expect((await deletionProtectionEnforcement(client)).state).toBe("missing");
    let objects = [object("kept", true), object("plain", false)];
    const audit = createDeletionProtectionAudit({
      kube: client,
      events,
      logger: pino({ level: "silent" }),
      objects: () => objects,
    });
    expect(audit.state()).toBeUndefined();
    await audit.run();
    await audit.run();
    // What mds_operator_deletion_protection_unenforced reads: protected objects count while the policy is missing.
    expect(audit.state()).toBe("missing");
    expect(recorded).toEqual([
      {
        name: "kept",
        type: "Warning",
        reason: "DeletionProtectionNotEnforced",
        message: expect.stringContaining(
          'nothing on this cluster enforces it (no ValidatingAdmissionPolicy "mds-deletion-protection" on the cluster)',
        ) as string,
      },
    ]);

    // The policy without a Deny binding enforces nothing either.
    const kc = new KubeConfig();
    kc.loadFromString(kube.kubeconfig);
    await applyDeletionProtectionPolicy(kc);
    const warn = await runKubectl(
      kube.kubeconfigPath,
      [
        "patch",
        "validatingadmissionpolicybinding",
        "mds-deletion-protection",
        "--type=merge",
        "-p",
        '{"spec":{"validationActions":["Warn"]}}',
      ],
      { cacheDir: join(dir, "cache") },
    );
    expect(warn.code, warn.stderr).toBe(0);
    expect(await deletionProtectionEnforcement(client)).toEqual({
      state: "missing",
      detail: 'no ValidatingAdmissionPolicyBinding of "mds-deletion-protection" with validationActions Deny',
    });

    await applyDeletionProtectionPolicy(kc);
    expect((await deletionProtectionEnforcement(client)).state).toBe("enforced");
    objects = [...objects, object("later", true)];
    await audit.run();
    expect(audit.state()).toBe("enforced");
    expect(recorded.map((r) => r.name)).toEqual(["kept"]);
  });
});
