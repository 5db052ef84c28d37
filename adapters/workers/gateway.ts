import type { LeadConfig } from "../../src/agents/app-config.ts";
import { deployConfigFromEnv, DEPLOY_ENV } from "../../src/cli/deploy-env.ts";
import { systemClock } from "../../src/core/clock.ts";
import { DeerflowError, errorMessage } from "../../src/core/errors.ts";
import { createGateway, type Gateway } from "../../src/gateway/app.ts";
import { assertModelApiKeysSet } from "../../src/models/factory.ts";
import type { Env } from "../../src/ports/runtime-ports.ts";
import { createVirtualSandboxProvider } from "../../src/sandbox/virtual.ts";
import { createMemoryKeyValue } from "../../src/storage/key-value.ts";

/*
 * The gateway as a Cloudflare Worker (deploy/cloudflare-worker.ts is the module a user deploys).
 * A Worker has no file system, no processes and no Web Workers, so: memory storage (one isolate's
 * lifetime), the virtual sandbox on the isolate's own thread (the platform's CPU limit stops a
 * runaway command), no extensions loaded from files, no stdio MCP servers. Everything else is
 * the gateway `deerflow-edge serve` runs, configured by the same schema as config.yaml.
 */

/** The binding that carries config.yaml's text (YAML or JSON): a var, or a secret when it holds keys. */
export const CONFIG_BINDING = DEPLOY_ENV.config;

/** A Worker's `env`: text vars and secrets, plus bindings of other kinds this adapter ignores. */
export type WorkerBindings = Readonly<Record<string, unknown>>;

/** The Worker's text bindings as the Env port (model keys, gateway API keys by `key_env`). */
export function createBindingsEnv(bindings: WorkerBindings): Env {
  return {
    get(name) {
      const value = bindings[name];
      return typeof value === "string" ? value : undefined;
    },
  };
}

/** A config a Worker cannot serve; the message says what to change in DEERFLOW_CONFIG. */
export class WorkerConfigError extends DeerflowError {
  declare readonly code: "worker_config_invalid";
  constructor(message: string, options?: { cause?: unknown }) {
    super("worker_config_invalid", message, options);
    this.name = "WorkerConfigError";
  }
}

/**
 * The lead config of the Worker's bindings: DEERFLOW_CONFIG (config.yaml's text) or the DEERFLOW_*
 * variables the Deno Deploy entry reads (src/cli/deploy-env.ts), auth required, storage memory
 * unless named. Refuses what needs a disk or processes: storage fs or deno-kv, sandbox local.
 */
export function workerConfig(bindings: WorkerBindings): LeadConfig {
  const text = bindings[CONFIG_BINDING];
  if (text !== undefined && typeof text !== "string") {
    throw new WorkerConfigError(`${CONFIG_BINDING} must be a text binding (config.yaml's YAML or JSON), not a ${typeof text}.`);
  }
  const config = deployConfigFromEnv(createBindingsEnv(bindings), "memory");
  if (config.storage.driver !== "memory") {
    throw new WorkerConfigError(
      `${CONFIG_BINDING}: storage.driver "${config.storage.driver}" needs ${config.storage.driver === "fs" ? "a file system" : "Deno"}, which a Worker has not; use driver: memory (or leave storage out).`,
    );
  }
  if (config.sandbox.use !== "virtual") {
    throw new WorkerConfigError(`${CONFIG_BINDING}: sandbox.use "${config.sandbox.use}" runs host processes, which a Worker cannot; use virtual (or leave sandbox out).`);
  }
  // What the CLI loads from files next to config.yaml; a Worker has no files to load them from.
  const fromFiles = [
    ...(config.plugins.length > 0 ? ["plugins"] : []),
    ...(config.extensions.middlewares.length > 0 ? ["extensions.middlewares"] : []),
    ...(config.skills?.path !== undefined ? ["skills.path"] : []),
  ];
  if (fromFiles.length > 0) {
    throw new WorkerConfigError(`${CONFIG_BINDING}: ${fromFiles.join(", ")} load${fromFiles.length === 1 ? "s" : ""} modules or folders from files, which a Worker has not; remove ${fromFiles.length === 1 ? "it" : "them"}.`);
  }
  return config;
}

/** The gateway of one isolate, from its bindings. Refuses to start without gateway.auth: a Worker answers the internet. */
export async function createWorkerGateway(bindings: WorkerBindings): Promise<Gateway> {
  const config = workerConfig(bindings);
  const env = createBindingsEnv(bindings);
  assertModelApiKeysSet(config, env);
  const storage = createMemoryKeyValue();
  return createGateway({
    config,
    storage,
    env,
    clock: systemClock,
    sandbox: createVirtualSandboxProvider({ storage, defaultTimeoutMs: config.sandbox.command_timeout_ms }),
    // Never a loopback address: with auth disabled the gateway refuses, as it should here.
    listening: { host: "0.0.0.0" },
  });
}

/** The part of a Worker's ExecutionContext this adapter uses. */
export interface WorkerContext {
  waitUntil(promise: Promise<unknown>): void;
}

/** What a Worker's module default export is. */
export interface WorkerHandler {
  fetch(request: Request, bindings: WorkerBindings, context?: WorkerContext): Promise<Response>;
}

/**
 * The Worker's fetch: the gateway is built on the first request (a Worker may not start timers or
 * I/O at module load) and kept for the isolate's life. A config it cannot start with answers 503
 * with the reason as `detail`, and is tried again on the next request (bindings may be fixed meanwhile).
 * A request that leaves runs in flight (runs.create answers before its run ends) extends its
 * life with waitUntil until they finish: the platform otherwise cancels what it started.
 */
export function createWorkerHandler(): WorkerHandler {
  let gateway: Promise<Gateway> | undefined;
  return {
    async fetch(request, bindings, context) {
      gateway ??= createWorkerGateway(bindings);
      let ready: Gateway;
      try {
        ready = await gateway;
      } catch (error) {
        gateway = undefined;
        const detail = errorMessage(error).split("\n")[0]!;
        console.error(`deerflow-edge: ${detail}`);
        return Response.json({ detail, code: (error as { code?: unknown }).code ?? "worker_start_failed" }, { status: 503 });
      }
      const response = await ready.fetch(request);
      if (context && ready.runs) context.waitUntil(ready.runs.settled());
      return response;
    },
  };
}
