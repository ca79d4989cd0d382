import type { Logger } from "pino";
import type {
  PublicConnection as Connection,
  PublicDatabase as Database,
  PublicProject as Project,
} from "../../contract/index.ts";
import { errorCode, isApiNotFound } from "../../operator/api.ts";
import type { MdsApi } from "./mds-api.ts";

// Remote state mirrored by paginated lists: a resync of N databases costs ⌈N/100⌉ calls, not N. Objects that
// are provisioning or recovering are read one by one (fast polling) until they settle.

/**
 * What the mirror keeps of a remote database: everything the operator reads, not the URLs, back-references and
 * masked credentials it never does (they were half of each entry; at 10,000 databases, 6 MB of heap).
 */
export type MirroredDatabase = Omit<Database, "url" | "connections"> & { connections: MirroredConnection[] };
export type MirroredConnection = Omit<Connection, "url" | "database" | "directConnection">;

function slim(db: MirroredDatabase): MirroredDatabase {
  const { connections, ...rest } = db;
  delete (rest as { url?: string }).url;
  return {
    ...rest,
    connections: connections.map(({ id, type, name, createdAt, kind, endpoints }) => ({
      id,
      type,
      name,
      createdAt,
      kind,
      endpoints,
    })),
  };
}

interface Entry<T> {
  value: T;
  at: number;
  /** Order of writes into the mirror: a read that began after a list began is newer than that list. */
  seq: number;
}

export interface RemoteMirror {
  /** Resolves after the first full list, so a restarted operator does not GET every object. */
  ready(): Promise<void>;
  refresh(): Promise<void>;
  /** `pollMs`: an unsettled entry younger than this is served as is (default: the fast interval). */
  getDatabase(id: string, pollMs?: number): Promise<MirroredDatabase | undefined>;
  getProject(id: string): Promise<Project | undefined>;
  /** What the mirror holds, without any call. */
  peekDatabase(id: string): MirroredDatabase | undefined;
  peekProject(id: string): Project | undefined;
  /** Databases of a project as last listed or read. */
  databasesOf(projectId: string): MirroredDatabase[];
  /**
   * The database with this `logicalId` in this project, answered from the mirror without a call; `known: false`
   * until the mirror has completed a full list of databases in this process (so whatever a crashed predecessor
   * created is in it) or when the service does not report `logicalId` (then only a per-object lookup can tell).
   */
  findDatabaseByLogicalId(projectId: string, logicalId: string): Lookup<MirroredDatabase>;
  /** The same for projects (unique by `logicalId` in the token's workspace). */
  findProjectByLogicalId(logicalId: string): Lookup<Project>;
  /**
   * A POST carrying this logicalId may have created an object whose answer never arrived: until `settle`, the
   * mirror does not answer for it (only the service can tell).
   */
  suspect(logicalId: string): void;
  settle(logicalId: string): void;
  putDatabase(db: MirroredDatabase): void;
  putProject(project: Project): void;
  forgetDatabase(id: string): void;
  start(intervalMs: number): void;
  stop(): void;
}

export type Lookup<T> = { known: true; value: T | undefined } | { known: false };

const settled = (db: Pick<Database, "status">) => db.status === "ready" || db.status === "failure";

// eslint-disable-next-line max-lines-per-function -- a factory: its closure is the mirror's state (entries, indexes, page cursors, suspects); each function is short
export function createRemoteMirror(options: {
  api: MdsApi;
  logger: Logger;
  /** Settled entries younger than this are served without a call. */
  maxAgeMs: number;
  /** An unsettled (provisioning, recovering) entry is read again at most this often. */
  fastMs?: number;
  onChange: (kind: "database" | "project", id: string) => void;
  pageSize?: number;
  /** While this process creates databases, the tail is listed once per this many creates (see tailListDue). */
  createsPerBurstList?: number;
}): RemoteMirror {
  const { api, logger } = options;
  const pageSize = options.pageSize ?? 100;
  const databases = indexedMap<MirroredDatabase>((db) =>
    typeof db.logicalId === "string" ? `${db.project.id}\n${db.logicalId}` : undefined,
  );
  const projects = indexedMap<Project>((p) => (typeof p.logicalId === "string" ? p.logicalId : undefined));
  /** A full database (project) list has completed in this process and every listed object carried `logicalId`. */
  const indexed = { databases: false, projects: false };
  const suspects = new Set<string>();
  let first: Promise<void> | undefined;
  let resyncTimer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let seq = 0;
  let lastDatabaseListAt = 0;
  const fresh = <T>(value: T): Entry<T> => ({ value, at: Date.now(), seq: ++seq });

  const fastMs = options.fastMs ?? 1_000;
  const burstListMs = 2 * fastMs;

  // A burst of creates (a team applying many Databases at once) runs at the credential's rate budget, and every
  // other call of this mirror is one a create waits for. Polling: a tail list costs one page (see walkDatabases), so
  // listing once per `createsPerBurstList` creates costs 1/70 of a call per create, the target being 0.02;
  // at the default budget (10 creates/s) that is a list every 7 s, which is how much longer a database created
  // mid-burst may wait to be seen Ready than one created alone (listed every two fast intervals as before); a slower
  // burst, which leaves the budget room, is listed at least every 10 fast intervals. Nothing cheaper exists: the API
  // filters lists by project only, so seeing N new databases Ready takes N/100 pages at least.
  const createsPerBurstList = options.createsPerBurstList ?? 70;
  const burstListMaxMs = 10 * fastMs;
  let createdSinceList = 0;
  let lastCreatedAt = -Infinity;
  /** When this process created each database it has not yet seen settled (for telling the young ones). */
  const bornAt = new Map<string, number>();
  /**
   * How long a database is expected to provision: the age of the oldest one the last tail list found provisioning
   * (halved back towards one fast interval when it found none), so that a list stops before those that cannot be
   * ready yet however slow the service is.
   */
  let youngMs = fastMs;
  const creating = () => Date.now() - lastCreatedAt < fastMs;
  /** Whether a fast-polling list is due now. */
  const tailListDue = () => {
    const sinceList = Date.now() - lastDatabaseListAt;
    if (sinceList < burstListMs) return false;
    return !creating() || createdSinceList >= createsPerBurstList || sinceList >= burstListMaxMs;
  };

  // Lists run in createdAt order (contract §7), so the databases still provisioning, the newest, sit in the last
  // pages: fast polling re-lists from the first page that holds one, with the cursor that fetched that page
  // (a keyset position), instead of walking all ⌈N/100⌉ pages. Deletions are left to the full resync.
  let pageCursors: (string | undefined)[] = [];
  const pageOfDb = new Map<string, number>();
  /** A tail list missed an unsettled database (deleted, or the cursor no longer placed it): list all next time. */
  let tailMissed = false;
  /** The first page holding an unsettled database; one created after the last list is newer than all listed. */
  const tailStart = () => {
    let start = Math.max(0, pageCursors.length - 1);
    for (const [id, e] of databases) {
      if (settled(e.value)) continue;
      const page = pageOfDb.get(id);
      if (page !== undefined && page < start) start = page;
    }
    return tailMissed ? 0 : start;
  };
  /**
   * What a tail list from page `from` would read: the databases the mirror places there or after (never listed
   * ones are the newest), and of them the young: created by this process too recently to be ready (`youngMs`).
   */
  const tailOf = (from: number) => {
    let items = 0;
    let young = 0;
    const now = Date.now();
    for (const [id, e] of databases) {
      const page = pageOfDb.get(id);
      if (page !== undefined && page < from) continue;
      items++;
      if (page === undefined && !settled(e.value) && now - (bornAt.get(id) ?? -Infinity) < youngMs) young++;
    }
    return { items, young };
  };
  /** The pages a fast-polling list walks against one GET per unsettled database. */
  const listIsCheaper = () => {
    let unsettled = 0;
    for (const e of databases.values()) if (!settled(e.value)) unsettled++;
    return unsettled > 2 && unsettled >= Math.ceil(tailOf(tailStart()).items / pageSize);
  };

  /**
   * Walks the database list from page `fromPage` to the end, recording where each database sits; with `upTo`, stops
   * after that many databases when more follow, and keeps the cursor of the rest as a page of its own. That is how a
   * burst's tail list costs one call: pages are otherwise cut every 100 databases from the first, so a list of the
   * last 70 would straddle two pages about 70 % of the time; stopped before the burst's youngest databases (which
   * cannot be ready yet), the list leaves the next one a cursor right where the unsettled databases start.
   */
  async function walkDatabases(fromPage: number, upTo?: number) {
    const seen = new Map<string, Database>();
    const cursors = pageCursors.slice(0, fromPage);
    let cursor = fromPage === 0 ? undefined : pageCursors[fromPage];
    let everyHasLogicalId = true;
    let read = 0;
    let stopped = false;
    for (let index = fromPage; ; index++) {
      const limit = upTo === undefined ? pageSize : Math.max(1, Math.min(pageSize, upTo - read));
      const page = await api.listDatabases({ limit, ...(cursor === undefined ? {} : { cursor }) });
      cursors[index] = cursor;
      // An item the client could not read may be anyone's: the index cannot prove an absence.
      if ((page.skipped ?? 0) > 0) everyHasLogicalId = false;
      for (const db of page.data) {
        seen.set(db.id, db);
        pageOfDb.set(db.id, index);
        if (db.logicalId === undefined) everyHasLogicalId = false;
      }
      read += page.data.length;
      cursor = page.pagination.hasMore && page.pagination.nextCursor !== null ? page.pagination.nextCursor : undefined;
      if (cursor === undefined) break;
      if (upTo !== undefined && read >= upTo) {
        cursors[index + 1] = cursor;
        stopped = true;
        break;
      }
    }
    pageCursors = cursors;
    return { seen, everyHasLogicalId, stopped };
  }

  /** Applies listed databases to the mirror; something read after the list started is newer than the list. */
  function applyListed(seen: Map<string, Database>, started: number) {
    for (const [id, db] of seen) {
      const before = databases.get(id);
      if (before !== undefined && before.seq > started) continue;
      const kept = slim(db);
      databases.set(id, fresh(kept));
      if (settled(kept)) bornAt.delete(id);
      if (before !== undefined && fingerprint(before.value) !== fingerprint(kept)) options.onChange("database", id);
    }
  }

  async function listTail(fromPage: number, upTo?: number) {
    const started = ++seq;
    lastDatabaseListAt = Date.now();
    lastBusyAt = lastDatabaseListAt;
    createdSinceList = 0;
    const listedAt = Date.now();
    const { seen, everyHasLogicalId, stopped } = await walkDatabases(fromPage, upTo);
    let provisioningFor = 0;
    for (const [id, db] of seen) {
      const born = bornAt.get(id);
      if (born !== undefined && !settled(db)) provisioningFor = Math.max(provisioningFor, listedAt - born);
    }
    youngMs = Math.min(burstListMaxMs, Math.max(fastMs, provisioningFor > 0 ? provisioningFor : youngMs / 2));
    applyListed(seen, started);
    for (const [id, e] of databases) {
      if (seen.has(id) || e.seq > started) continue;
      const page = pageOfDb.get(id);
      if (stopped) {
        // Not reached: after the cursor the walk stopped at (a database that was not there after all is found out
        // by the first walk to the end, as below).
        if (page === undefined || page >= fromPage) pageOfDb.delete(id);
      } else if (!settled(e.value)) tailMissed = true;
    }
    if (!everyHasLogicalId) indexed.databases = false;
  }
  const fingerprint = (db: MirroredDatabase) =>
    `${db.status}|${db.name}|${db.isDefault}|${db.connections.map((c) => c.id).join(",")}`;

  async function listAll(withProjects: boolean) {
    const started = ++seq;
    lastDatabaseListAt = Date.now();
    createdSinceList = 0;
    pageOfDb.clear();
    const { seen: seenDb, everyHasLogicalId: everyDbHasLogicalId } = await walkDatabases(0);
    tailMissed = false;
    for (const [id, entry] of databases) {
      // Something read after the list started is newer than the list.
      if (!seenDb.has(id) && entry.seq < started) {
        databases.delete(id);
        bornAt.delete(id);
        options.onChange("database", id);
      }
    }
    applyListed(seenDb, started);
    indexed.databases = everyDbHasLogicalId;
    if (!withProjects) return;
    const seenProjects = new Map<string, Project>();
    let everyProjectHasLogicalId = true;
    let cursor: string | undefined;
    do {
      const page = await api.listProjects({ limit: pageSize, ...(cursor === undefined ? {} : { cursor }) });
      if ((page.skipped ?? 0) > 0) everyProjectHasLogicalId = false;
      for (const p of page.data) {
        seenProjects.set(p.id, p);
        if (p.logicalId === undefined) everyProjectHasLogicalId = false;
      }
      cursor = page.pagination.hasMore && page.pagination.nextCursor !== null ? page.pagination.nextCursor : undefined;
    } while (cursor !== undefined);
    for (const [id, entry] of projects) {
      if (!seenProjects.has(id) && entry.seq < started) {
        projects.delete(id);
        options.onChange("project", id);
      }
    }
    for (const [id, p] of seenProjects) {
      const before = projects.get(id);
      if (before !== undefined && before.seq > started) continue;
      projects.set(id, fresh(p));
    }
    indexed.projects = everyProjectHasLogicalId;
  }

  // The resync (every database page and the projects, ⌈N/100⌉ + 1 calls) is drift detection, background work: due
  // while this process creates databases or lists a burst's tail, it waits until that has been quiet for a few fast
  // intervals instead of taking those calls from the creates' budget (at N = 1,000, 11 calls in the middle of a
  // 100 s burst), for at most two resync intervals past its due time. A remote change is then seen within three
  // resync intervals instead of one, only while one credential's creates keep coming that long. Meanwhile settled
  // entries are served as long past `maxAgeMs` as the resync is late: they are no staler than the resync left them,
  // and a GET each would cost more than the resync that was put off.
  let resyncEveryMs = 0;
  let resyncDueAt = Infinity;
  let lastBusyAt = -Infinity;
  const quietMs = 3 * fastMs;
  /** The due time of a resync put off, until it has run (a timer that merely fired late makes nothing fresh). */
  let putOffSince: number | undefined;
  const resyncOverdueMs = () => (putOffSince === undefined ? 0 : Math.max(0, Date.now() - putOffSince));
  function armResync(delayMs: number) {
    resyncTimer = setTimeout(resyncWhenQuiet, delayMs);
    resyncTimer.unref();
  }
  function resyncWhenQuiet() {
    const dueAt = resyncDueAt;
    const busy = Math.max(lastBusyAt, lastCreatedAt);
    if (Date.now() - busy < quietMs && Date.now() - dueAt < 2 * resyncEveryMs) {
      putOffSince = dueAt;
      return armResync(fastMs);
    }
    resyncDueAt = Date.now() + resyncEveryMs;
    armResync(resyncEveryMs);
    refresh()
      .catch((err: unknown) => logger.warn({ err }, "Could not list remote objects"))
      .finally(() => {
        if (putOffSince === dueAt) putOffSince = undefined;
      });
  }

  let runningDatabases: Promise<void> | undefined;
  /** Databases only, from the first page holding an unsettled one: what fast polling needs. */
  async function refreshDatabases() {
    if (running !== undefined) return running;
    runningDatabases ??= (async () => {
      const from = tailStart();
      if (from === 0) return listAll(false);
      // During a burst, the youngest databases are left for the next list (see walkDatabases).
      const tail = tailOf(from);
      const upTo = creating() ? tail.items - tail.young : undefined;
      if (upTo !== undefined && upTo <= 0) return;
      try {
        await listTail(from, upTo);
      } catch (err) {
        // A service that refuses an earlier cursor (400): walk everything.
        if (errorCode(err) !== "invalid_request") throw err;
        await listAll(false);
      }
    })().finally(() => (runningDatabases = undefined));
    return runningDatabases;
  }

  async function refresh() {
    running ??= listAll(true).finally(() => (running = undefined));
    const current = running;
    if (first === undefined) {
      first = current.catch((err: unknown) => {
        first = undefined;
        throw err;
      });
      // Whoever awaits ready() sees the failure; an unobserved one must not crash the process.
      first.catch(() => {});
    }
    return current;
  }

  return {
    ready() {
      if (first === undefined) return refresh();
      return first;
    },
    refresh,
    async getDatabase(id, pollMs = fastMs) {
      await this.ready();
      const entry = databases.get(id);
      const age = entry === undefined ? Infinity : Date.now() - entry.at;
      if (entry !== undefined && settled(entry.value) && age < options.maxAgeMs + resyncOverdueMs()) return entry.value;
      if (entry !== undefined && !settled(entry.value) && age < pollMs) return entry.value;
      if (entry !== undefined && listIsCheaper()) {
        // Many databases provisioning at once (a burst of applies): one list serves them all, at most once per
        // two fast intervals, and while this process creates, once per `createsPerBurstList` creates (tailListDue).
        if (!tailListDue()) return entry.value;
        await refreshDatabases();
        const listed = databases.get(id);
        if (listed !== undefined) return listed.value;
      }
      try {
        const db = slim(await api.getDatabase(id));
        databases.set(id, fresh(db));
        if (settled(db)) bornAt.delete(id);
        return db;
      } catch (err) {
        if (isApiNotFound(err)) {
          databases.delete(id);
          bornAt.delete(id);
          return undefined;
        }
        throw err;
      }
    },
    async getProject(id) {
      await this.ready();
      const entry = projects.get(id);
      if (entry !== undefined && Date.now() - entry.at < options.maxAgeMs + resyncOverdueMs()) return entry.value;
      try {
        const p = await api.getProject(id);
        projects.set(id, fresh(p));
        return p;
      } catch (err) {
        if (isApiNotFound(err)) {
          projects.delete(id);
          return undefined;
        }
        throw err;
      }
    },
    peekDatabase(id) {
      return databases.get(id)?.value;
    },
    peekProject(id) {
      return projects.get(id)?.value;
    },
    databasesOf(projectId) {
      return [...databases.values()].map((e) => e.value).filter((db) => db.project.id === projectId);
    },
    findDatabaseByLogicalId(projectId, logicalId) {
      if (!indexed.databases || suspects.has(logicalId)) return { known: false };
      return { known: true, value: databases.byKey(`${projectId}\n${logicalId}`)?.value };
    },
    findProjectByLogicalId(logicalId) {
      if (!indexed.projects || suspects.has(logicalId)) return { known: false };
      return { known: true, value: projects.byKey(logicalId)?.value };
    },
    suspect: (logicalId) => void suspects.add(logicalId),
    settle: (logicalId) => void suspects.delete(logicalId),
    putDatabase(db) {
      // A database new to the mirror and not settled is one this process has just created.
      if (!databases.has(db.id) && !settled(db)) {
        createdSinceList++;
        lastCreatedAt = Date.now();
        bornAt.set(db.id, lastCreatedAt);
      }
      databases.set(db.id, fresh(slim(db)));
    },
    putProject(project) {
      projects.set(project.id, fresh(project));
    },
    forgetDatabase(id) {
      databases.delete(id);
      bornAt.delete(id);
      pageOfDb.delete(id);
    },
    start(intervalMs) {
      if (resyncTimer !== undefined) return;
      resyncEveryMs = intervalMs;
      resyncDueAt = Date.now() + intervalMs;
      armResync(intervalMs);
    },
    stop() {
      if (resyncTimer !== undefined) clearTimeout(resyncTimer);
      resyncTimer = undefined;
      resyncDueAt = Infinity;
      putOffSince = undefined;
    },
  };
}

/** A Map by id that also indexes its entries by a secondary key (`logicalId`), kept in step on every write. */
function indexedMap<T>(keyOf: (value: T) => string | undefined) {
  const byId = new Map<string, Entry<T>>();
  const index = new Map<string, string>();
  const unindex = (id: string) => {
    const old = byId.get(id);
    const k = old === undefined ? undefined : keyOf(old.value);
    if (k !== undefined && index.get(k) === id) index.delete(k);
  };
  return {
    get: (id: string) => byId.get(id),
    has: (id: string) => byId.has(id),
    get size() {
      return byId.size;
    },
    values: () => byId.values(),
    [Symbol.iterator]: () => byId[Symbol.iterator](),
    set(id: string, entry: Entry<T>) {
      unindex(id);
      byId.set(id, entry);
      const k = keyOf(entry.value);
      if (k !== undefined) index.set(k, id);
    },
    delete(id: string) {
      unindex(id);
      return byId.delete(id);
    },
    byKey(key: string): Entry<T> | undefined {
      const id = index.get(key);
      return id === undefined ? undefined : byId.get(id);
    },
  };
}
