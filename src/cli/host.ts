import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import type { AppConfig } from "../config/index.ts";
import type { ManagerHost } from "../ports/extension-manager.ts";
import type { DeploymentFiles } from "../ports/deployment-files.ts";
import type { KeyValue } from "../ports/key-value.ts";
import type { ModuleLoader } from "../ports/module-loader.ts";
import type { McpStdioTransportFactory } from "../ports/mcp-transport.ts";
import type { Clock, Env, ReclaimMemory } from "../ports/runtime-ports.ts";
import type { SandboxProvider } from "../ports/sandbox.ts";
import type { ServeFetch } from "../ports/http-server.ts";
import type { VersionedKeyValue } from "../ports/versioned-key-value.ts";
import type { RunCoordinator } from "../runtime/runs/coordinator.ts";
import type { StreamBus } from "../runtime/runs/stream-bus.ts";

/** One worker's share of a store several gateway processes use at once (storage.driver "postgres"). */
export interface SharedStorage {
  readonly storage: KeyValue;
  readonly versioned: VersionedKeyValue;
  /** Absent: the gateway's own checkpointer over `storage`. */
  readonly checkpointer?: BaseCheckpointSaver;
  readonly coordination: { readonly coordinator: RunCoordinator; readonly bus: StreamBus; readonly workerId: string; readonly leaseGraceMs?: number };
  /** After the gateway's shutdown: the bus's connection, then the pool. */
  close(): Promise<void>;
}

export interface CliOutput {
  write(text: string): void;
  readonly isTTY: boolean;
}

/** What a runtime adapter provides so the CLI itself stays runtime-neutral. */
export interface CliHost {
  readonly argv: readonly string[];
  readonly env: Env;
  readonly clock: Clock;
  readonly stdout: CliOutput;
  readonly stderr: CliOutput;
  /** The file's text, or undefined when it does not exist. */
  readFile(path: string): Promise<string | undefined>;
  /**
   * Replaces a file's text atomically (a temporary file in the same folder, then a rename), as the
   * gateway writes extensions_config.json; absent where this entry has no writable file system.
   */
  writeFileAtomic?(path: string, text: string): Promise<void>;
  /** The configured storage; a skills folder, when given, is mounted read-only under `skills`. */
  createStorage(config: AppConfig["storage"], options?: { skillsDir?: string | undefined }): KeyValue;
  /**
   * The stores of one worker among several (async, so apart from createStorage): storage.driver
   * "postgres" connects, migrates and opens them; "deno-kv" opens them on one KV handle where this
   * entry serves many isolates (the Deploy entry). Undefined where the driver is one process's here
   * (then createStorage serves); the method is absent where this entry has no PostgreSQL client.
   */
  openSharedStorage?(config: AppConfig["storage"], options?: { skillsDir?: string | undefined }): Promise<SharedStorage | undefined>;
  createSandboxProvider(config: AppConfig, storage: KeyValue): SandboxProvider;
  /** The skills folder as a place skills are installed into; absent where nothing may be written (then installing answers 501). */
  createSkillsFolder?(skillsDir: string): DeploymentFiles;
  /** Loads extension modules; relative specifiers resolve against `baseDir` (the config file's folder). */
  createModuleLoader(baseDir: string): ModuleLoader;
  /** Launches stdio MCP servers (host processes); absent where the runtime cannot spawn them. */
  readonly mcpStdio?: McpStdioTransportFactory;
  /** The folder of a file path, as this runtime's paths go. */
  dirname(path: string): string;
  /** Registers a handler for Ctrl-C (and, where the runtime has it, SIGTERM); returns a function that unregisters it. */
  onInterrupt(handler: () => void): () => void;
  /** Serves a fetch handler on this runtime's HTTP server (`deerflow-edge serve`). */
  readonly serve: ServeFetch;
  /** Asks this runtime to collect garbage once the served runs went quiet; absent where it reclaims idle memory by itself. */
  readonly reclaimMemory?: ReclaimMemory;
  /** Files, npm and the cross-process lock for `deerflow-edge extension`; absent where the runtime cannot run npm. */
  createExtensionManagerHost?(): ManagerHost;
  /** One line from standard input without its line end; undefined at end of input (or with no input). */
  readLine?(): Promise<string | undefined>;
}
