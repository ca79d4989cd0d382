import pg from "pg";
import type { TestService } from "../support/test-service.ts";

import { eventually } from "../support/eventually.ts";

export { eventually };

export type Response<T = unknown> = { status: number; headers: Headers; body: T };
// Responses are loosely typed in tests: schemas check the shapes.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;

export function client(service: Pick<TestService, "url">, token: string) {
  return async function request(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<Response<Json>> {
    const init: RequestInit = { method, headers: { authorization: `Bearer ${token}`, ...headers } };
    if (body !== undefined) {
      init.body = typeof body === "string" ? body : JSON.stringify(body);
      (init.headers as Record<string, string>)["content-type"] ??= "application/json";
    }
    const res = await fetch(`${service.url}${path}`, init);
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      // not JSON: keep the text
    }
    return { status: res.status, headers: res.headers, body: parsed };
  };
}

export async function sql<R extends pg.QueryResultRow = Record<string, unknown>>(
  url: string,
  text: string,
  params: unknown[] = [],
): Promise<R[]> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  c.on("error", () => {});
  await c.connect();
  try {
    return (await c.query<R>(text, params)).rows;
  } finally {
    await c.end();
  }
}

/** Whether a connection string logs in; the error code when it does not (never the URL). */
export async function tryConnect(url: string): Promise<true | string> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  c.on("error", () => {});
  try {
    await c.connect();
    await c.query("SELECT 1");
    return true;
  } catch (err) {
    return (err as { code?: string }).code ?? "error";
  } finally {
    await c.end().catch(() => {});
  }
}

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

type Api = ReturnType<typeof client>;

/** The database once it is neither provisioning nor recovering (ready, or failure). */
export async function settledDatabase(api: Api, id: string): Promise<Json> {
  return eventually(
    async () => {
      const d = (await api("GET", `/v1/databases/${id}`)).body.data as Json;
      if (d.status === "provisioning" || d.status === "recovering") throw new Error(d.status);
      return d;
    },
    { timeoutMs: 60_000 },
  );
}

/** Takes a manual backup of the database and waits until it is completed. */
export async function completedBackup(api: Api, dbId: string): Promise<Json> {
  const created = await api("POST", `/v1/databases/${dbId}/backups`);
  if (created.status !== 201) throw new Error(`POST backups answered ${created.status}`);
  return eventually(async () => {
    const found = ((await api("GET", `/v1/databases/${dbId}/backups`)).body.data as Json[]).find(
      (b: Json) => b.id === (created.body as Json).data.id,
    );
    if (found.status !== "completed") throw new Error(found.status);
    return found;
  });
}
