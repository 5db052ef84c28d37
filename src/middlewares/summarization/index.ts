// The summarization family: what the rest of the code base uses of it.
export * from "./context.ts";
export * from "./prompt.ts";
export * from "./summarization.ts";
