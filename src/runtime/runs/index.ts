export { RunManager, type CancelOptions, type RunManagerOptions, type ShutdownReport } from "./manager.ts";
export { RunStore, type RunListQuery } from "./run-store.ts";
export { MemoryStreamBridge, type MemoryStreamBridgeOptions, type StreamBridge, type StreamFrame, type StreamGap, type SubscribeOptions } from "./stream-bridge.ts";
export { readThreadValues, restorePreRunCheckpoint, writeFallbackTitle } from "./checkpoints.ts";
export { ROLLED_BACK } from "./worker.ts";
export { allCheckpointWritesSettled, checkpointWritesSettled, trackCheckpointWrites } from "./settle.ts";
export * from "./types.ts";
