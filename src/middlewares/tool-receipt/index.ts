// The tool-receipt family: what the rest of the code base uses of it.
export * from "./stamp.ts";
export * from "./tool-receipt.ts";
