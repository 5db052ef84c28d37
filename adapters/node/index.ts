// deerflow-edge/node: refuses other runtimes, installs AsyncLocalStorage, then offers Node's port implementations.
import "./runtime-guard.ts";
import "../shared/als.ts";

export { createNodeEnv } from "./env.ts";
export { createNodeProcessRunner } from "./process-runner.ts";
export { createFsKeyValue } from "../shared/fs-key-value.ts";
export { createKeyValue, type KeyValueConfig } from "../shared/storage.ts";
export { createLocalSandboxProvider } from "../shared/local-sandbox.ts";
export { createCliHost } from "../shared/cli-host.ts";
export { createModuleLoader } from "../shared/module-loader.ts";
export { createMcpStdioTransportFactory } from "../shared/mcp-stdio.ts";
export { createFsDriver } from "../shared/fs-key-value.ts";
export { serveNode } from "./serve.ts";
export { createNodeSandboxWorkers } from "./sandbox-worker.ts";
