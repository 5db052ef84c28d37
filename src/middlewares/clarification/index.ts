// The clarification family: what the rest of the code base uses of it.
export * from "./clarification.ts";
export * from "./payload.ts";
