// Metrics hooks: plain callbacks so the caller chooses the metrics library. A hook that throws
// is ignored; it must never break a call.

interface AttemptEvent {
  /** Client method, e.g. `getDatabase`. */
  operation: string;
  method: string;
  /** 1 for the first attempt. */
  attempt: number;
  /** HTTP status when a response arrived. */
  status?: number;
  /** `ok`, the error code of the response, or `timeout` / `network_error` / `aborted`. */
  outcome: string;
  durationMs: number;
}

export interface RequestEvent {
  operation: string;
  method: string;
  /** HTTP status of the last attempt when a response arrived. */
  status?: number;
  /** `ok` or the thrown error's code. */
  outcome: string;
  attempts: number;
  /** From the call to its result, waits included. */
  durationMs: number;
}

interface ThrottleEvent {
  operation: string;
  /** Time held by the shared rate budget (its token bucket, or a pause a 429 set). */
  waitedMs: number;
}

interface RetryEvent {
  operation: string;
  /** The attempt that failed. */
  attempt: number;
  outcome: string;
  status?: number;
  delayMs: number;
}

interface SkippedItemEvent {
  /** The list method, e.g. `listDatabases`. */
  operation: string;
}

export interface ClientHooks {
  /** After every HTTP attempt. */
  onAttempt?(event: AttemptEvent): void;
  /** Once per method call, with its final outcome. */
  onRequest?(event: RequestEvent): void;
  /** When the rate budget held a call before an attempt. */
  onThrottled?(event: ThrottleEvent): void;
  /** When a failed attempt will be retried after `delayMs`. */
  onRetry?(event: RetryEvent): void;
  /** When a list item could not be read and was left out of its page (the rest of the page is returned). */
  onSkippedItem?(event: SkippedItemEvent): void;
}

/** The subset of a pino logger the client uses; pass `logger.child({ component: "mds-client" })`. */
export interface ClientLogger {
  debug(object: object, message: string): void;
  warn(object: object, message: string): void;
}

export function callHook<E>(hook: ((event: E) => void) | undefined, event: E): void {
  if (hook === undefined) return;
  try {
    hook(event);
  } catch {
    // Metrics must not break requests.
  }
}
