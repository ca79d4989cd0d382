import type { FastifyRequest } from "fastify";
import { invalidRequest, ServiceError } from "../shared/errors.ts";

// One check for every string a request brings, wherever it comes from (path, query string, JSON body, the headers
// the service reads), before any of it reaches a schema, a query or a log line. PostgreSQL's text refuses a NUL (a
// 500 when it got that far), a lone surrogate cannot be encoded as UTF-8 at all, and a control character or a
// megabyte-long value has no place in an id, a name or a filter. The message names where the value was, never the
// value itself.

/** Longer than any id, name, git name (255), logicalId (128) or cursor (400) the API accepts. */
const maxTextLength = 1024;

// C0 controls (NUL included), DEL and the C1 controls.
// eslint-disable-next-line no-control-regex
const control = /[\u0000-\u001f\u007f-\u009f]/;

/** What is wrong with `value`, or undefined. */
function textProblem(value: string): string | undefined {
  if (value.length > maxTextLength) return `is longer than ${maxTextLength} characters`;
  if (!value.isWellFormed()) return "is not well-formed Unicode (it holds a lone surrogate)";
  if (value.includes("\0")) return "contains a NUL character";
  if (control.test(value)) return "contains a control character";
  return undefined;
}

const hint = "send printable text of at most 1024 characters";

function check(value: string, where: string): void {
  const problem = textProblem(value);
  if (problem) throw invalidRequest(`${where} ${problem}`, hint);
}

/**
 * The path's segments and the query string as sent: each must be valid percent-encoded UTF-8 (an overlong or
 * truncated sequence is refused here, before a lenient decoder turns it into U+FFFD), and each decoded name and value
 * must pass `textProblem`.
 */
export function checkRequestLine(req: FastifyRequest): void {
  const url = req.raw.url ?? req.url;
  const at = url.indexOf("?");
  const path = at === -1 ? url : url.slice(0, at);
  for (const segment of path.split("/")) check(decoded(segment, "the path"), "a path segment");
  if (at !== -1) checkPairs(url.slice(at + 1), "query parameter");
  const key = req.headers["idempotency-key"];
  for (const value of Array.isArray(key) ? key : key === undefined ? [] : [key])
    check(value, "the Idempotency-Key header");
}

/** `a=b&c=d` as sent (a query string, a form body): each name and value, by the name (`what "name"`). */
export function checkPairs(text: string, what: string): void {
  for (const pair of text.split("&")) {
    if (!pair) continue;
    const eq = pair.indexOf("=");
    const name = decoded(eq === -1 ? pair : pair.slice(0, eq), `a ${what}'s name`);
    check(name, `a ${what}'s name`);
    const where = `${what} ${JSON.stringify(name.slice(0, 100))}`;
    if (eq !== -1) check(decoded(pair.slice(eq + 1), where), where);
  }
}

function decoded(raw: string, where: string): string {
  try {
    return decodeURIComponent(raw.replaceAll("+", " "));
  } catch {
    throw invalidRequest(
      `${where} is not valid percent-encoded UTF-8`,
      "percent-encode the UTF-8 bytes of each character",
    );
  }
}

/** The body's bytes as UTF-8, refusing what is not (overlong and truncated sequences, encoded surrogates). */
export function utf8Body(raw: Buffer): string {
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(raw);
  } catch {
    throw invalidRequest("request body is not valid UTF-8", "send the body as UTF-8");
  }
}

/**
 * Every key and string of a parsed JSON body, by its path (`invalid request body: source.databaseId: contains a NUL
 * character`, as a schema's refusal reads), without recursion. A field in `unprocessable` is refused with 422, for
 * the routes where the public API answers a bad value of it so (a branch's gitName).
 */
export function checkJsonStrings(value: unknown, unprocessable: readonly string[] = []): void {
  const stack: { value: unknown; path: string }[] = [{ value, path: "" }];
  while (stack.length) {
    const { value: v, path } = stack.pop()!;
    if (typeof v === "string") {
      const problem = textProblem(v);
      if (problem) {
        const message = `invalid request body: ${path.slice(0, 200) || "body"}: ${problem}`;
        throw unprocessable.includes(path)
          ? new ServiceError("unprocessable", message, hint)
          : invalidRequest(message, hint);
      }
    } else if (Array.isArray(v)) v.forEach((item, i) => stack.push({ value: item, path: `${path}[${i}]` }));
    else if (v && typeof v === "object")
      for (const [k, item] of Object.entries(v)) {
        check(k, `invalid request body: a field name in ${path.slice(0, 200) || "body"}`);
        stack.push({ value: item, path: path ? `${path}.${k}` : k });
      }
  }
}
