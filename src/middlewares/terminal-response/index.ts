// The terminal-response family: what the rest of the code base uses of it.
export * from "./terminal-response.ts";
