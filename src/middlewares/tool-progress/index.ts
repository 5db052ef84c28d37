// The tool-progress family: what the rest of the code base uses of it.
export * from "./state.ts";
export * from "./tool-progress.ts";
