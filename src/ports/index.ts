export * from "./sandbox.ts";
export * from "./runtime-ports.ts";
export type { KeyValue } from "./key-value.ts";
export * from "./module-loader.ts";
export type { McpStdioLaunch, McpStdioTransport, McpStdioTransportFactory, McpTransport } from "./mcp-transport.ts";
export type { SandboxWorker, SandboxWorkerChannel, SandboxWorkerPort } from "./sandbox-worker.ts";
