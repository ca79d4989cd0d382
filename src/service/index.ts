// The service's public surface (a barrel only): what the CLI, `mds dev` and tests import.
export { createApp } from "./start/app.ts";
export { ServiceConfig, RegionConfig, type ServiceConfigInput } from "./config/config.ts";
export { createServiceToken, listServiceTokens, revokeToken, ensureWorkspace } from "./domain/tokens.ts";
export { createServiceLogger } from "./runtime/logger.ts";
export { startEmbeddedService, type EmbeddedServiceOptions } from "./embedded/stack.ts";
export { startService, type StartServiceOptions, type RunningService } from "./start/service.ts";
