export * from "./thread-state.ts";
