// The one polling helper of the tests: retries a probe until it passes or the time is up.

export interface EventuallyOptions {
  /** How long to keep trying (default 45 s). */
  timeoutMs?: number;
  /** Pause between tries (default 100 ms). */
  intervalMs?: number;
  /** What is awaited, for the timeout's message ("the operator's health server"). */
  what?: string;
  /**
   * Checked before every try: an error it returns ends the wait at once, thrown as is (a condition no retry can
   * fix, e.g. a request the RBAC refused).
   */
  stopWhen?: () => Error | undefined;
}

/**
 * Calls `probe` until it returns without throwing and with something other than `false`, and returns that. A probe
 * may assert (`() => expect(x).toBe(y)`), throw, or be a condition (`() => list().length === 2`). On timeout it
 * throws an error that names `what` and carries the last failure in its message and as its cause.
 */
export async function eventually<T>(
  probe: () => T | Promise<T>,
  options: EventuallyOptions = {},
): Promise<Exclude<T, false>> {
  const timeoutMs = options.timeoutMs ?? 45_000;
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    const stop = options.stopWhen?.();
    if (stop !== undefined) throw stop;
    try {
      const value = await probe();
      if (value !== false) return value as Exclude<T, false>;
      last = new Error("the condition is still false");
    } catch (err) {
      last = err;
    }
    if (Date.now() >= deadline) {
      const reason = last instanceof Error ? last.message : String(last);
      throw new Error(
        `eventually timed out after ${timeoutMs} ms${options.what ? ` waiting for ${options.what}` : ""}: ${reason}`,
        { cause: last },
      );
    }
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 100));
  }
}
