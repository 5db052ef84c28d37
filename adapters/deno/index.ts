// deerflow-edge/deno: refuses other runtimes, installs AsyncLocalStorage, then offers Deno's port implementations.
import "./runtime-guard.ts";
import "../shared/als.ts";
// langsmith's profile lookup must not need --allow-sys=homedir (see the file).
import "./langsmith-profile.ts";
import { createKeyValue as createSharedKeyValue, type KeyValueConfig } from "../shared/storage.ts";
import type { KeyValue } from "../../src/ports/key-value.ts";
import { assertDenoMayWrite, createDenoKvKeyValue } from "./kv-key-value.ts";

export { createDenoEnv } from "./env.ts";
export { createDenoProcessRunner } from "./process-runner.ts";
export { createFsKeyValue } from "../shared/fs-key-value.ts";
export type { KeyValueConfig } from "../shared/storage.ts";
export { createDenoKvKeyValue, createDenoKvDriver, DENO_KV_LIMITS, type DenoKvLike, type DenoKvOptions } from "./kv-key-value.ts";
export { createDenoKvRecords, type DenoKvWatchable } from "./kv-key-value.ts";
export { DenoKvRunCoordinator, type DenoKvRunCoordinatorOptions } from "./kv-run-coordinator.ts";
export { DenoKvStreamBus, type DenoKvStreamBusOptions } from "./kv-stream-bus.ts";
export { openDenoKvCoordination, type DenoKvCoordination, type DenoKvCoordinationOptions } from "./kv-coordination.ts";

/** The KeyValue a config names, Deno KV included (`{ driver: "deno-kv", path? }`). */
export function createKeyValue(config: KeyValueConfig): KeyValue {
  return createSharedKeyValue(config, { denoKv: createDenoKvKeyValue, assertFsWritable: assertDenoMayWrite });
}
export { createLocalSandboxProvider } from "../shared/local-sandbox.ts";
export { createCliHost } from "../shared/cli-host.ts";
export { createModuleLoader } from "../shared/module-loader.ts";
export { createMcpStdioTransportFactory } from "../shared/mcp-stdio.ts";
export { createFsDriver } from "../shared/fs-key-value.ts";
export { serveDeno } from "./serve.ts";
export { createWebSandboxWorkers } from "../shared/web-sandbox-worker.ts";
