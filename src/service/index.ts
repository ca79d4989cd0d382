// The service's public surface (a barrel only): what the CLI, `mds dev` and tests import.
export { createApp } from "./app.ts";
export { ServiceConfig, RegionConfig, type ServiceConfigInput } from "./config.ts";
export { createServiceToken, listServiceTokens, revokeToken, ensureWorkspace } from "./tokens.ts";
export { createServiceLogger } from "./logger.ts";
export { startEmbeddedService, type EmbeddedServiceOptions } from "./embedded.ts";
export { startService, type StartServiceOptions, type RunningService } from "./start.ts";
