// The uploads family: what the rest of the code base uses of it.
export * from "./outline.ts";
export * from "./uploads.ts";
