// The tool-error-handling family: what the rest of the code base uses of it.
export * from "./subagent.ts";
export * from "./tool-error-handling.ts";
