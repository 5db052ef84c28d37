// The token-usage family: what the rest of the code base uses of it.
export * from "./attribution.ts";
export * from "./token-usage.ts";
