import type { LeadConfig } from "../agents/app-config.ts";
import { DeerflowError, errorMessage } from "../core/errors.ts";
import type { ExtensionDiagnostic } from "../extensions/diagnostics.ts";
import { loadExtensions } from "../extensions/loader.ts";
import { assertModelApiKeysSet, assertReplayRecordingsLoaded, describeModel } from "../models/factory.ts";
import { createGateway, type Gateway } from "../gateway/app.ts";
import { parseGatewayConfig } from "../config/gateway.ts";
import type { HttpServerHandle } from "../ports/http-server.ts";
import type { LiveMcpConfig } from "../mcp/index.ts";
import type { CliHost, SharedStorage } from "./host.ts";
import { liveMcpConfig, loadOperatorMiddlewares } from "./run.ts";

export interface ServeCommandOptions {
  readonly config: LeadConfig;
  readonly configSource: string;
  readonly configDir: string;
  readonly host?: string;
  readonly port?: number;
  /** Resolves when the server should stop (tests); default: Ctrl-C or SIGTERM. */
  readonly until?: Promise<void>;
  /** Told once the server listens (tests read the URL from it). */
  readonly onListening?: (server: HttpServerHandle) => void;
}

/** What assembling the gateway needs from the host: no terminal input, no server, no signals. */
export type GatewayHost = Pick<CliHost, "env" | "clock" | "stderr" | "readFile" | "writeFileAtomic" | "mcpStdio" | "createModuleLoader" | "createStorage" | "openSharedStorage" | "createSandboxProvider" | "createSkillsFolder" | "reclaimMemory">;

export interface OpenGatewayOptions {
  readonly config: LeadConfig;
  readonly configDir: string;
  /** Where the server will listen: off loopback the gateway refuses to start without auth. */
  readonly hostname: string;
}

export interface OpenedGateway {
  readonly gateway: Gateway;
  /** Runs drained, services stopped in reverse, storage closed, MCP servers stopped. */
  close(): Promise<void>;
}

/**
 * The gateway `serve` runs, assembled from a config: what is installed (plugins, MCP servers,
 * configured middlewares) is loaded, never resolved or installed. A model without its key or a
 * required plugin that fails stops here, before any port is served. The Deploy entries build
 * their config from the environment and serve the same gateway.
 */
export async function openGateway(host: GatewayHost, options: OpenGatewayOptions): Promise<OpenedGateway> {
  const { config } = options;
  const reportDiagnostic = (d: ExtensionDiagnostic) => host.stderr.write(`${d.level}: extension ${d.source}: ${d.message}\n`);
  let mcp: LiveMcpConfig | undefined;
  let shared: SharedStorage | undefined;
  try {
    // A model that cannot authenticate would fail every request that uses it: refuse before
    // anything loads or any port opens.
    assertModelApiKeysSet(config, host.env);
    assertReplayRecordingsLoaded(config);
    const moduleLoader = host.createModuleLoader(options.configDir);
    mcp = liveMcpConfig(host, options.configDir);
    const configuredMiddlewares = await loadOperatorMiddlewares(config, mcp, moduleLoader);
    // Loaded now so a file that fails its schema stops the start; later runs re-read it.
    await mcp.current();
    const loaded = await loadExtensions(config.plugins, moduleLoader, { onDiagnostic: reportDiagnostic });
    const storageOptions = { skillsDir: config.skills?.path };
    if (config.storage.driver === "postgres" || config.storage.driver === "deno-kv") shared = await host.openSharedStorage?.(config.storage, storageOptions);
    if (config.storage.driver === "postgres" && !shared) {
      throw new DeerflowError("storage_config_invalid", 'storage.driver "postgres" needs a PostgreSQL client, which this entry does not have; use "fs", "memory" or "deno-kv" here.');
    }
    const storage = shared?.storage ?? host.createStorage(config.storage, storageOptions);
    // One worker among several: records written by compare-and-set, runs coordinated through the shared store.
    const distributed = shared ? { ...(shared.checkpointer ? { checkpointer: shared.checkpointer } : {}), versioned: shared.versioned, coordination: shared.coordination } : {};
    const gateway = await createGateway({
      config,
      storage,
      ...distributed,
      env: host.env,
      clock: host.clock,
      sandbox: host.createSandboxProvider(config, storage),
      ...(config.skills?.path && host.createSkillsFolder ? { skillsFolder: host.createSkillsFolder(config.skills.path) } : {}),
      extensions: loaded.extensions,
      mcpConfig: mcp,
      configuredMiddlewares,
      listening: { host: options.hostname },
      ...(host.reclaimMemory ? { runs: { reclaimMemory: host.reclaimMemory } } : {}),
      onDiagnostic: reportDiagnostic,
      logger: {
        info: (message) => host.stderr.write(`${message}\n`),
        warn: (message) => host.stderr.write(`warning: ${message}\n`),
        error: (message) => host.stderr.write(`error: ${message}\n`),
      },
    });
    const opened = mcp;
    const store = shared;
    return {
      gateway,
      async close() {
        await gateway.shutdown().catch(() => {});
        await store?.close().catch(() => {});
        await opened?.close().catch(() => {});
      },
    };
  } catch (error) {
    await shared?.close().catch(() => {});
    await mcp?.close().catch(() => {});
    throw error;
  }
}

/** What the start line says after a model's name: the demo and replay models are not providers. */
function modelLabel(config: LeadConfig, name: string): string {
  const provider = describeModel(name, config).provider;
  if (provider === "demo") return " (built-in demo model)";
  if (provider === "replay") return " (replay model: plays a recorded session, no provider is called)";
  return "";
}

/**
 * `deerflow-edge serve`: the gateway on this runtime's HTTP server. Starting loads what is
 * installed (plugins, MCP servers, configured middlewares) and never resolves or installs a
 * package. A required plugin that fails stops here, before any port is served. On Ctrl-C or
 * SIGTERM: runs drained (5 s), services stopped in reverse, storage closed, then the server.
 */
export async function serveCommand(host: CliHost, options: ServeCommandOptions): Promise<number> {
  const { config } = options;
  const gatewayConfig = parseGatewayConfig(config.gateway);
  const hostname = options.host ?? gatewayConfig.host;
  const port = options.port ?? gatewayConfig.port;
  let opened: OpenedGateway | undefined;
  let server: HttpServerHandle | undefined;
  try {
    opened = await openGateway(host, { config, configDir: options.configDir, hostname });
    const { gateway } = opened;
    server = await host.serve(gateway.fetch, { hostname, port }).catch((error: unknown) => {
      throw new DeerflowError(
        "serve_failed",
        `Could not listen on ${hostname}:${port} (${errorMessage(error)}); pick another port with --port or stop what uses it.`,
      );
    });
    options.onListening?.(server);
    const model = gateway.deps.config.default_model ?? (gateway.deps.config.models[0]?.name ?? "demo");
    const auth = gatewayConfig.auth.mode === "disabled" ? "auth off (loopback only)" : `auth ${gatewayConfig.auth.mode}`;
    host.stdout.write(
      `deerflow-edge gateway · ${server.url} · ${auth} · model ${model}${modelLabel(gateway.deps.config, model)} · ${options.configSource}\n` +
        `  LangGraph Platform API under ${server.url}/api (threads, runs, SSE streams)\n` +
        `  next: curl ${server.url}/api/ok   or point @langchain/langgraph-sdk's Client at apiUrl "${server.url}/api"\n` +
        `  stop with Ctrl-C\n`,
    );
    await (options.until ?? new Promise<void>((resolve) => {
      const unregister = host.onInterrupt(() => {
        unregister();
        resolve();
      });
    }));
    host.stdout.write("stopping: draining runs, stopping services, closing storage…\n");
    return 0;
  } catch (error) {
    host.stderr.write(`error: ${errorMessage(error).split("\n")[0]}\n`);
    return 1;
  } finally {
    // The gateway first (runs drained, storage closed), then the server, then the MCP servers.
    await opened?.gateway.shutdown().catch(() => {});
    await server?.close().catch(() => {});
    await opened?.close().catch(() => {});
  }
}
