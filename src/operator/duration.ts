import { TerminalError } from "./errors.ts";

// Durations as users write them in specs and annotations (rotation.every, mds.dev/poll-interval).

const units: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

/** A Kubernetes-style duration ("720h", "1h30m", "45s", "500ms") in milliseconds. */
export function parseDuration(text: string): number {
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join("") !== text)
    throw new TerminalError("InvalidSpec", `"${text.slice(0, 40)}" is not a duration such as 720h, 1h30m or 45s`);
  return parts.reduce((sum, p) => sum + Number(p[1]) * units[p[2]!]!, 0);
}
