// The tool-error-handling family: what the rest of the code base uses of it.
export * from "../../tools/subagent-result.ts";
export * from "./tool-error-handling.ts";
