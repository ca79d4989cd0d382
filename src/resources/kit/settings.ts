import { z } from "zod";
import { parseDuration } from "../../operator/duration.ts";

// A kind's settings: what its controller takes from `mds operator`, each a flag and an environment variable that the
// kind declares in its module (`settings`). src/cli/operator-config.ts parses them beside the operator's own options
// and docs/cli.md lists them, from the registry; nothing outside the kind's folder names them.

/** One setting: its flag, its environment variable, its help, and how its text becomes its value. */
export interface KindSetting<T> {
  flag: string;
  env: string;
  /** What it does, its default, and when to change it (`mds operator --help`, docs/cli.md). */
  help: string;
  /** Parses the flag's or the variable's text; its issues' messages are shown after the flag's name. */
  parse: z.ZodType<T, string>;
}

/** A kind's declarations, one per key of the settings its controller takes. */
export type KindSettings<S> = { [K in keyof S]-?: KindSetting<Exclude<S[K], undefined>> };

/** A duration as the specs take it ("45s", "5m", "1h30m") or a plain number of milliseconds, in milliseconds. */
export function parseOptionDuration(text: string): number | undefined {
  const t = text.trim();
  if (/^\d+$/.test(t)) return Number(t);
  try {
    return Math.round(parseDuration(t));
  } catch {
    return undefined;
  }
}

/** A duration option's text, in milliseconds between `min` and `max`. */
export const duration = (min: number, max: number) =>
  z.string().transform((s, ctx) => {
    const ms = parseOptionDuration(s);
    if (ms === undefined || ms < min || ms > max) {
      ctx.addIssue({
        code: "custom",
        message: `expected a duration like 1s or 5m between ${min} ms and ${max / 1000} s, got "${s}"`,
      });
      return z.NEVER;
    }
    return ms;
  });
