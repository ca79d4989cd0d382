// The wire contract of the Managed Database Service API (this folder; PUBLIC-API.md: the public API's differences): one source for the service and the client.
export * from "./ids.ts";
export * from "./regions.ts";
export * from "./errors.ts";
export * from "./resources.ts";
export * from "./public-responses.ts";
export * from "./bodies.ts";
