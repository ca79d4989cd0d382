import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { startDevkube, type Devkube } from "@mds/devkube";
import { createKubeClient, type KubeClient } from "../kube/client.ts";
import { parseKubeConfig } from "../kube/kubeconfig.ts";
import { SecretType, type KubeObject, type ResourceType } from "../kube/types.ts";
import {
  managedController,
  parseOrTerminal,
  resolveCredentials,
  type ControllerContext,
} from "../operator/controller.ts";
import type { ExternalClient, ManagedObject } from "../operator/managed-handler.ts";
import { remoteIdOf } from "../operator/identity.ts";
import { createOperator, type Operator } from "../operator/index.ts";
import { Conditions } from "./conditions.ts";
import { crdOf, type CrdDefinition } from "./kit/crd.ts";
import { apiVersion, group, version } from "./group.ts";
import type { KindModule } from "./kit/kind-module.ts";
import { conditionsHealthScript } from "./kit/kind-module.ts";
import { age, condition } from "./kit/printer-columns.ts";

// A kind plugs in without an edit in src/operator: a throwaway kind, `Note`, written here the way a kind's folder is
// (src/resources/README.md, "Adding a kind"): schema, external client over a remote API of its own, controller,
// module. The operator is given only its controller and its remote, and reconciles it on devkube: created remotely,
// updated when the spec changes, deleted with deletionPolicy Delete.

// --- note/schema.ts
const NoteSpec = z
  .object({
    text: z.string().max(200).describe("What the remote note says."),
    deletionPolicy: z.enum(["Retain", "Delete"]).default("Retain").describe("Delete the remote note with this one."),
  })
  .describe("A remote note.");
const NoteStatus = z
  .object({
    id: z.string().max(64).optional().describe("Remote id."),
    observedGeneration: z.number().int().optional().describe("The generation last reconciled."),
    conditions: Conditions.optional(),
  })
  .describe("What the operator saw.");
const Note = z
  .object({
    apiVersion: z.string().max(64).describe("API version."),
    kind: z.string().max(64).describe("Kind."),
    metadata: z.looseObject({ name: z.string(), namespace: z.string().optional() }).describe("Metadata."),
    spec: NoteSpec,
    status: NoteStatus.optional(),
  })
  .describe("A note kept at a remote service.");
type NoteObject = z.infer<typeof Note> & ManagedObject;
const noteDefinition: CrdDefinition = {
  kind: "Note",
  plural: "notes",
  singular: "note",
  shortNames: ["mdsnote"],
  spec: NoteSpec,
  status: NoteStatus,
  whole: Note,
  printerColumns: [condition("Ready"), age],
};
const NoteType: ResourceType = { group, version, plural: "notes", kind: "Note", namespaced: true };

// --- note/external.ts: the kind's own remote calls, its own client and its own writes.
interface NoteApi {
  createNote(text: string): Promise<{ id: string }>;
  getNote(id: string): Promise<{ id: string; text: string } | undefined>;
  updateNote(id: string, text: string): Promise<void>;
  deleteNote(id: string): Promise<void>;
}
interface NoteRemote {
  api: NoteApi;
  mirror: { start(): void; stop(): void };
}
function createNoteExternal(api: NoteApi): ExternalClient<NoteObject> {
  return {
    async observe(obj) {
      const id = remoteIdOf(obj);
      const note = id === undefined ? undefined : await api.getNote(id);
      if (note === undefined)
        return {
          exists: false,
          status: {},
          ready: { ok: false, reason: "Creating", message: "" },
          drift: [],
          fastPoll: false,
        };
      const drift = note.text === obj.spec.text ? [] : [{ field: "text", desired: obj.spec.text, actual: note.text }];
      return { exists: true, status: { id: note.id }, ready: { ok: true }, drift, fastPoll: false };
    },
    async create(obj) {
      const { id } = await api.createNote(obj.spec.text);
      return { id, adopted: false, status: {} };
    },
    async update(obj) {
      await api.updateNote(remoteIdOf(obj)!, obj.spec.text);
    },
    async delete(obj) {
      const id = remoteIdOf(obj);
      if (id !== undefined) await api.deleteNote(id);
      return { done: true };
    },
  };
}

// --- note/controller.ts and note/index.ts
const noteController = managedController(
  { kind: "Note", type: NoteType, steps: ["create", "update", "delete"] },
  (ctx: ControllerContext<NoteRemote>) => ({
    kind: "Note",
    type: NoteType,
    parse: (raw) => parseOrTerminal(Note, "Note", raw) as NoteObject,
    async connect(obj) {
      const { api, use } = await resolveCredentials(ctx, obj.metadata.namespace ?? "default", {});
      return { ...createNoteExternal(api), credentials: use };
    },
  }),
);
const noteModule: KindModule<NoteRemote> = {
  definition: noteDefinition,
  access: { verbs: ["patch"], why: "finalizer by merge patch" },
  deletionProtection: false,
  api: { reads: ["getNote"], writes: ["createNote", "updateNote", "deleteNote"] },
  // A real kind's controller calls the service (MdsRemote); this one brings a remote of its own (below): the
  // operator builds whichever it is given.
  reasons: {},
  secretKeys: [],
  settings: {},
  controller: () => noteController,
  healthScript: conditionsHealthScript,
};

describe("adding a kind", () => {
  let dir = "";
  let devkube: Devkube;
  let client: KubeClient;
  let operator: Operator;
  const notes = new Map<string, string>();
  const noteApi: NoteApi = {
    createNote: async (text) => {
      const id = `note_${notes.size + 1}`;
      notes.set(id, text);
      return { id };
    },
    getNote: async (id) => (notes.has(id) ? { id, text: notes.get(id)! } : undefined),
    updateNote: async (id, text) => void notes.set(id, text),
    deleteNote: async (id) => void notes.delete(id),
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "mds-new-kind-"));
    devkube = await startDevkube({ dir: join(dir, "kube") });
    const kubeConfig = parseKubeConfig(devkube.kubeconfig);
    client = createKubeClient(kubeConfig);
    const crdType: ResourceType = {
      group: "apiextensions.k8s.io",
      version: "v1",
      plural: "customresourcedefinitions",
      kind: "CustomResourceDefinition",
      namespaced: false,
    };
    await client.create(crdType, crdOf(noteModule.definition) as KubeObject);
    await client.create(SecretType, {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "mds-credentials", namespace: "default" },
      stringData: { token: "note-token" },
    } as KubeObject);
    operator = createOperator<NoteRemote>({
      kubeConfig,
      apiUrl: "http://notes.invalid",
      controllers: [noteController],
      remote: {
        client: () => noteApi,
        writes: noteModule.api.writes,
        mirror: () => ({ start() {}, stop() {} }),
      },
      defaultCredentials: { secretNamespace: "default", secretName: "mds-credentials", key: "token" },
      namespaces: undefined,
      instanceId: "adding-a-kind",
      concurrency: 1,
      pollIntervals: { fastMs: 100, slowMs: 60_000 },
      logger: pino({ level: "silent" }),
      metrics: new Registry(),
      canWrite: () => true,
    });
    await operator.start();
  });
  afterAll(async () => {
    await operator?.stop();
    await devkube?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  async function until<T>(read: () => Promise<T>, ok: (value: T) => boolean): Promise<T> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const value = await read();
      if (ok(value) || Date.now() > deadline) return value;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  const note = () => client.get<NoteObject>(NoteType, "default", "hello");

  it("is created, updated and deleted at its remote by the operator's loop", async () => {
    expect(crdOf(noteModule.definition)).toMatchObject({ spec: { names: { kind: "Note" } } });
    await client.create(NoteType, {
      apiVersion,
      kind: "Note",
      metadata: { name: "hello", namespace: "default" },
      spec: { text: "first", deletionPolicy: "Delete" },
    } as KubeObject);
    const ready = await until(
      note,
      (n) => n?.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false,
    );
    const id = ready?.status?.id;
    expect(id).toMatch(/^note_/);
    expect(notes.get(id!)).toBe("first");
    expect(ready?.metadata.finalizers).toContain(`${group}/finalizer`);

    const current = (await note())!;
    await client.replace(NoteType, { ...current, spec: { ...current.spec, text: "second" } });
    expect(
      await until(
        async () => notes.get(id!),
        (text) => text === "second",
      ),
    ).toBe("second");

    await client.delete(NoteType, "default", "hello");
    expect(await until(note, (n) => n === undefined)).toBeUndefined();
    expect(notes.has(id!)).toBe(false);
  });
});
