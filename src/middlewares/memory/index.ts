// The memory family: what the rest of the code base uses of it.
export * from "./config.ts";
export * from "./extractors.ts";
export * from "./memory.ts";
export * from "./store.ts";
