// The llm-error-handling family: what the rest of the code base uses of it.
export * from "./classify.ts";
export * from "./limiter.ts";
export * from "./llm-error-handling.ts";
