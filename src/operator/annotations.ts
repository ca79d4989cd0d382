import { parseDuration } from "./duration.ts";

// The annotations a user puts on a resource to steer the managed loop (documented in the operator README). Metadata
// changes do not change `generation`: none of them counts as a spec change.

/**
 * The remote id, written right after a create (status may not be written yet when a crash follows): identity.ts reads
 * it as a last resort, and only once proven by logicalId.
 */
export const externalIdAnnotation = "mds.dev/external-id";
/** "true": the loop leaves the resource alone (deletion still runs). */
export const pausedAnnotation = "mds.dev/paused";
/** Any new value asks for a reconcile now (the watch event enqueues it); status.lastHandledReconcileAt echoes it. */
export const reconcileRequestedAnnotation = "mds.dev/reconcile-requested-at";
/** This resource's settled poll interval (a duration), instead of the operator's --poll-slow. */
const pollIntervalAnnotation = "mds.dev/poll-interval";
const pollIntervalBounds = { minMs: 5_000, maxMs: 24 * 3600_000 };

/** The settled poll interval of a resource; a bad value gives the default and what to fix. */
export function pollIntervalOf(
  annotations: Record<string, string> | undefined,
  defaultMs: number,
): { ms: number; problem?: string } {
  const value = annotations?.[pollIntervalAnnotation];
  if (value === undefined) return { ms: defaultMs };
  let ms = Number.NaN;
  try {
    ms = parseDuration(value);
  } catch {
    // reported below, with the annotation's name
  }
  if (ms >= pollIntervalBounds.minMs && ms <= pollIntervalBounds.maxMs) return { ms };
  return {
    ms: defaultMs,
    problem: `annotation ${pollIntervalAnnotation} "${value.slice(0, 64)}" is not a duration between 5s and 24h (e.g. 30s, 10m, 1h); polling at the default interval`,
  };
}
