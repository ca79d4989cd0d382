export * from "./types.ts";
export * from "./errors.ts";
export * from "./client.ts";
export * from "./informer.ts";
export * from "./kubeconfig.ts";
