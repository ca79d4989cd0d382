import { echo, invalidRequest } from "../shared/errors.ts";

// Keyset pagination on (created_at, id): a walk returns every item that existed throughout exactly once,
// whatever is inserted or deleted meanwhile. The cursor is opaque to clients: base64url of "<timestamp µs>|<id>".

export type Cursor = { ts: string; id: string };

/** The SQL expression that renders created_at for a cursor (microsecond precision, UTC). */
export const cursorTs = (column = "created_at") =>
  `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

export function encodeCursor(c: Cursor): string {
  return Buffer.from(`${c.ts}|${c.id}`, "utf8").toString("base64url");
}

/** True when `ts` (…T…\.ffffffZ) names a real instant: it survives a round trip through Date unchanged. */
function isRealTimestamp(ts: string): boolean {
  const at = new Date(ts);
  return !Number.isNaN(at.getTime()) && at.toISOString().slice(0, 19) === ts.slice(0, 19);
}

export function decodeCursor(text: string | undefined): Cursor | undefined {
  if (text === undefined) return undefined;
  const bad = () =>
    invalidRequest(`invalid cursor ${echo(text)}`, "pass pagination.nextCursor of the previous page unchanged");
  if (!/^[A-Za-z0-9_-]{1,400}$/.test(text)) throw bad();
  const decoded = Buffer.from(text, "base64url").toString("utf8");
  const match = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z)\|([a-z]{2,5}_[a-z0-9]{1,64})$/.exec(decoded);
  // Date.parse accepts impossible dates (2020-02-30), which PostgreSQL then refuses with a 500: round-trip instead.
  if (!match || !isRealTimestamp(match[1]!)) throw bad();
  return { ts: match[1]!, id: match[2]! };
}

/** Splits limit+1 fetched rows into a page and its pagination object. */
export function paginate<T extends { cursor_ts: string; id: string }>(
  rows: T[],
  limit: number,
): { items: T[]; pagination: { nextCursor: string | null; hasMore: boolean } } {
  const hasMore = rows.length > limit;
  const items = hasMore ? rows.slice(0, limit) : rows;
  const last = items[items.length - 1];
  return {
    items,
    pagination: { hasMore, nextCursor: hasMore && last ? encodeCursor({ ts: last.cursor_ts, id: last.id }) : null },
  };
}
