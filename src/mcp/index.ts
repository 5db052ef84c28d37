export * from "./metadata.ts";
export * from "./config.ts";
export * from "./client.ts";
export * from "./result.ts";
export * from "./session-pool.ts";
export * from "./tools.ts";
export * from "./live-config.ts";
