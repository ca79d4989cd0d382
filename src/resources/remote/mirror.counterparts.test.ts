import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient } from "../../client/index.ts";
import type { MdsApi } from "./mds-api.ts";
import { createRemoteMirror } from "./mirror.ts";
import { startTestService, type TestService } from "../../../test/support/test-service.ts";
import { startPublicApiEmulator, type PublicApiEmulator } from "../../../test/support/public-api-emulator/server.ts";

// A burst's tail list stops before the youngest databases with a limit under the page size and resumes from the
// cursor the service gave back (src/resources/remote/mirror.ts, walkDatabases): only `limit` and `cursor`, which both
// our service and the public API (its emulator) document, so it must hold against both.

let service: TestService;
let emulator: PublicApiEmulator;
beforeAll(async () => {
  service = await startTestService();
  emulator = await startPublicApiEmulator({ upstream: service.url });
});
afterAll(async () => {
  await emulator?.stop();
  await service?.stop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(["service", "emulator"] as const)("a burst's tail list against the %s", (counterpart) => {
  it("stops before the youngest databases, then resumes exactly where they start", async () => {
    const api = createClient({
      baseUrl: counterpart === "service" ? service.url : emulator.url,
      token: service.token,
    }) as unknown as MdsApi;
    const project = await api.createProject({ name: `tail-${counterpart}` });
    const create = async (name: string) => (await api.createDatabase({ projectId: project.id, name })).id;
    const readyAtService = async (ids: string[]) => {
      for (const id of ids) while ((await api.getDatabase(id)).status !== "ready") await sleep(50);
    };
    const old = [];
    for (let i = 0; i < 6; i++) old.push(await create(`old-${i}`));
    await readyAtService(old);

    const fastMs = 2_000;
    const mirror = createRemoteMirror({
      api,
      logger: pino({ level: "silent" }),
      maxAgeMs: 60_000,
      fastMs,
      pageSize: 5,
      createsPerBurstList: 1,
      onChange: () => {},
    });
    const lists: Array<{ limit?: number; cursor?: string; ids: string[] }> = [];
    const listDatabases = api.listDatabases.bind(api);
    api.listDatabases = async (params) => {
      const page = await listDatabases(params);
      lists.push({ ...params, ids: page.data.map((d) => d.id) });
      return page;
    };
    await mirror.ready();
    const listedAt = Date.now();

    // Batch A is created, then ready at the service; batch B is being created (young) when a poll comes.
    const a = [];
    for (let i = 0; i < 4; i++) {
      const id = await create(`a-${i}`);
      mirror.putDatabase(await api.getDatabase(id));
      a.push(id);
    }
    await readyAtService(a);
    await sleep(Math.max(0, listedAt + 2 * fastMs - Date.now()));
    const b = [];
    for (let i = 0; i < 3; i++) {
      const created = await api.createDatabase({ projectId: project.id, name: `b-${i}` });
      mirror.putDatabase({ ...created, status: "provisioning" });
      b.push(created.id);
    }
    lists.length = 0;
    await mirror.getDatabase(a[0]!, 0);
    for (const id of a) expect(mirror.peekDatabase(id)?.status).toBe("ready");
    for (const id of b) expect(mirror.peekDatabase(id)?.status).toBe("provisioning");
    const stop = lists[lists.length - 1]!;
    expect(stop.ids[stop.ids.length - 1]).toBe(a[3]);
    expect(lists.flatMap((l) => l.ids)).not.toContain(b[0]);

    // The burst is over: one page from where B starts sees all of it.
    await readyAtService(b);
    await sleep(2 * fastMs);
    lists.length = 0;
    await mirror.getDatabase(b[0]!, 0);
    expect(lists).toHaveLength(1);
    expect(lists[0]!.cursor).toBeDefined();
    expect(lists[0]!.ids).toEqual(b);
    for (const id of b) expect(mirror.peekDatabase(id)?.status).toBe("ready");
  }, 60_000);
});
