// The sandbox-audit family: what the rest of the code base uses of it.
export * from "./classify.ts";
export * from "./sandbox-audit.ts";
