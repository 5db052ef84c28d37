// The safety-finish-reason family: what the rest of the code base uses of it.
export * from "./detectors.ts";
export * from "./safety-finish-reason.ts";
