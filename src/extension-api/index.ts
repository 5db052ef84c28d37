export * from "./errors.ts";
export * from "./canonical.ts";
export * from "./provenance.ts";
export * from "./placement.ts";
export * from "./release.ts";
export * from "./assembly.ts";
export * from "./compaction.ts";
export * from "./sha256-sync.ts";
