// The model-length-finish-reason family: what the rest of the code base uses of it.
export * from "./detectors.ts";
export * from "./model-length-finish-reason.ts";
