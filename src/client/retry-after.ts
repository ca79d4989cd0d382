/**
 * Parses `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP date. Returns the wait in
 * milliseconds from `now`, or undefined when the header is absent or unreadable. A date in the
 * past means "now" (0).
 */
export function parseRetryAfter(value: string | string[] | undefined, now: number): number | undefined {
  const raw = Array.isArray(value) ? value[0] : value;
  if (raw === undefined) return undefined;
  const text = raw.trim();
  if (text === "") return undefined;
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  // Only a real date: Date.parse accepts bare numbers and odd strings we should not honour.
  if (!/[a-z]/i.test(text)) return undefined;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now);
}
