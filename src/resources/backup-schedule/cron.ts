// A 5-field cron expression (minute hour day-of-month month day-of-week), in UTC, as a CronJob's `schedule`: numbers,
// `*`, ranges `a-b`, lists `a,b`, steps `*/n` and `a-b/n`, and the macros @hourly, @daily (@midnight), @weekly,
// @monthly, @yearly (@annually). Day-of-month and day-of-week follow cron: when both are restricted, a day matching
// either matches. No names (MON, JAN), no seconds, no `?`, `L`, `W` or `#`: refused with what is wrong.

interface Cron {
  minutes: Set<number>;
  hours: Set<number>;
  days: Set<number>;
  months: Set<number>;
  weekdays: Set<number>;
  /** Both day fields restricted: a day matches if either matches (cron's rule). */
  dayOr: boolean;
}

const macros: Record<string, string> = {
  "@yearly": "0 0 1 1 *",
  "@annually": "0 0 1 1 *",
  "@monthly": "0 0 1 * *",
  "@weekly": "0 0 * * 0",
  "@daily": "0 0 * * *",
  "@midnight": "0 0 * * *",
  "@hourly": "0 * * * *",
};

const fields = [
  { name: "minute", min: 0, max: 59 },
  { name: "hour", min: 0, max: 23 },
  { name: "day of month", min: 1, max: 31 },
  { name: "month", min: 1, max: 12 },
  { name: "day of week", min: 0, max: 7 },
] as const;

export class CronError extends Error {}

function parseField(text: string, f: (typeof fields)[number]): Set<number> {
  const out = new Set<number>();
  const num = (s: string) => {
    if (!/^\d{1,2}$/.test(s)) throw new CronError(`${f.name}: "${s}" is not a number`);
    const n = Number(s);
    if (n < f.min || n > f.max) throw new CronError(`${f.name}: ${n} is outside ${f.min}-${f.max}`);
    return n;
  };
  for (const part of text.split(",")) {
    const [range, stepText, extra] = part.split("/");
    if (extra !== undefined || range === undefined || range === "")
      throw new CronError(`${f.name}: "${part}" is malformed`);
    const step = stepText === undefined ? 1 : num(stepText);
    if (step === 0) throw new CronError(`${f.name}: a step of 0`);
    let lo: number;
    let hi: number;
    if (range === "*") [lo, hi] = [f.min, f.max];
    else if (range.includes("-")) {
      const [a, b, more] = range.split("-");
      if (more !== undefined) throw new CronError(`${f.name}: "${range}" is malformed`);
      [lo, hi] = [num(a ?? ""), num(b ?? "")];
      if (lo > hi) throw new CronError(`${f.name}: ${lo}-${hi} is an empty range`);
    } else {
      lo = num(range);
      hi = stepText === undefined ? lo : f.max;
    }
    for (let v = lo; v <= hi; v += step) out.add(f.name === "day of week" && v === 7 ? 0 : v);
  }
  return out;
}

/** Parses a schedule; throws CronError saying which field is wrong. */
export function parseCron(expression: string): Cron {
  const text = expression.trim();
  const expanded = macros[text.toLowerCase()] ?? text;
  if (expanded.startsWith("@")) throw new CronError(`unknown macro "${text}"`);
  const parts = expanded.split(/\s+/);
  if (parts.length !== 5)
    throw new CronError(`expected 5 fields (minute hour day-of-month month day-of-week), got ${parts.length}`);
  const [minutes, hours, days, months, weekdays] = parts.map((p, i) => parseField(p, fields[i]!));
  return {
    minutes: minutes!,
    hours: hours!,
    days: days!,
    months: months!,
    weekdays: weekdays!,
    dayOr: !parts[2]!.startsWith("*") && !parts[4]!.startsWith("*"),
  };
}

function matches(c: Cron, t: Date): boolean {
  if (!c.minutes.has(t.getUTCMinutes()) || !c.hours.has(t.getUTCHours()) || !c.months.has(t.getUTCMonth() + 1))
    return false;
  const dom = c.days.has(t.getUTCDate());
  const dow = c.weekdays.has(t.getUTCDay());
  return c.dayOr ? dom || dow : dom && dow;
}

const minute = 60_000;
// Past 5 years without a match (e.g. "0 0 30 2 *", February 30th) there is none.
const horizonMs = 5 * 366 * 24 * 60 * minute;

/** The first slot strictly after `after` (ms), or undefined when the schedule never fires. */
export function nextSlot(c: Cron, after: number): number | undefined {
  let t = Math.floor(after / minute) * minute + minute;
  for (const end = after + horizonMs; t < end; t += minute) {
    const d = new Date(t);
    // Whole days or hours that cannot match are skipped at once.
    if (!c.months.has(d.getUTCMonth() + 1) || !dayMatches(c, d)) {
      t = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1) - minute;
      continue;
    }
    if (!c.hours.has(d.getUTCHours())) {
      t = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate(), d.getUTCHours() + 1) - minute;
      continue;
    }
    if (matches(c, d)) return t;
  }
  return undefined;
}

function dayMatches(c: Cron, d: Date): boolean {
  const dom = c.days.has(d.getUTCDate());
  const dow = c.weekdays.has(d.getUTCDay());
  return c.dayOr ? dom || dow : dom && dow;
}

/** The latest slot in (`after`, `upTo`], or undefined when there is none: what a schedule that was down takes. */
export function latestSlot(c: Cron, after: number, upTo: number): number | undefined {
  // Windows ending at upTo, doubling from a minute until one holds a slot; then walked forward within it (a
  // per-minute schedule down for a year is not walked minute by minute).
  for (let width = minute; ; width *= 2) {
    const from = Math.max(after, upTo - width);
    let found: number | undefined;
    for (let t = nextSlot(c, from); t !== undefined && t <= upTo; t = nextSlot(c, t)) found = t;
    if (found !== undefined || from === after) return found;
  }
}
