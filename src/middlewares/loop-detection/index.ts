// The loop-detection family: what the rest of the code base uses of it.
export * from "./forced-stop.ts";
export * from "./hash.ts";
export * from "./loop-detection.ts";
