// Times as status, conditions and events carry them: RFC 3339 in UTC to the second, as Kubernetes writes its own
// (metav1.Time drops fractions, so a value written with them would read back different and look changed).

/** `t` as "2026-01-02T03:04:05Z" (fractions of a second dropped). */
export function isoSeconds(t: Date | number | string): string {
  return new Date(t).toISOString().replace(/\.\d+Z$/, "Z");
}
