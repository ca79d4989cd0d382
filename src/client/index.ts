// The API client of the Managed Database Service: the one way the rest of mds talks to it.
export { createClient } from "./client.ts";
export type { ClientOptions, MdsClient } from "./client.ts";
export * from "./errors.ts";
export type { ClientHooks, ClientLogger, RequestEvent } from "./hooks.ts";
export { defaultRateLimit, type RateLimitOptions } from "./rate-budget.ts";
export { systemClock, type Clock } from "./clock.ts";
export { prometheusHooks } from "./prometheus-hooks.ts";
