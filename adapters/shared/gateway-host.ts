import { resolve } from "node:path";
import type { GatewayHost } from "../../src/cli/serve.ts";
import type { CliOutput } from "../../src/cli/host.ts";
import { systemClock } from "../../src/core/clock.ts";
import { DeerflowError } from "../../src/core/errors.ts";
import type { Env, ProcessRunner, ReclaimMemory } from "../../src/ports/runtime-ports.ts";
import type { SandboxWorkerPort } from "../../src/ports/sandbox-worker.ts";
import { createVirtualSandboxProvider } from "../../src/sandbox/virtual.ts";
import { createLocalSandboxProvider } from "./local-sandbox.ts";
import { createFsDriver } from "./fs-key-value.ts";
import { createModuleLoader } from "./module-loader.ts";
import { createKeyValue, type RuntimeKeyValues } from "./storage.ts";

/** What the gateway needs from a runtime: no terminal input, no server, no signals. */
export interface GatewayBits {
  readonly env: Env;
  readonly stderr: CliOutput;
  /** Host processes for `sandbox.use: local`; absent where nothing may be spawned (a Deploy entry). */
  readonly runner?: ProcessRunner;
  readonly reclaimMemory?: ReclaimMemory;
  /** Where the virtual sandbox runs its commands, off the thread that serves requests; absent: on that thread. */
  readonly sandboxWorkers?: SandboxWorkerPort;
  /** Drivers only this runtime has (Deno KV on Deno). */
  readonly keyValues?: RuntimeKeyValues;
}

/**
 * The gateway's host, shared by the CLI and the Deploy entries: storage, the sandbox and the module
 * loader as `serve` uses them. It reads no file (no MCP config: `readFile` finds nothing) and
 * launches no MCP server; the CLI host adds both.
 */
export function createGatewayHost(bits: GatewayBits): GatewayHost {
  return {
    env: bits.env,
    clock: systemClock,
    stderr: bits.stderr,
    ...(bits.reclaimMemory ? { reclaimMemory: bits.reclaimMemory } : {}),
    createModuleLoader: (baseDir) => createModuleLoader({ baseDir }),
    readFile: async () => undefined,
    createStorage(config, options) {
      const storage = createKeyValue(
        config.driver === "fs"
          ? { driver: "fs", base: resolve(config.base) }
          : config.driver === "deno-kv"
            ? // A file against the working folder; a KV Connect URL or ":memory:" as written.
              { driver: "deno-kv", path: config.path === undefined || /^([a-z][a-z0-9+.-]*:\/\/|:memory:$)/i.test(config.path) ? config.path : resolve(config.path) }
            : { driver: "memory" },
        bits.keyValues,
      );
      if (options?.skillsDir) storage.mount("skills", createFsDriver(resolve(options.skillsDir), { readOnly: true }));
      return storage;
    },
    createSandboxProvider(config, storage) {
      const defaultTimeoutMs = config.sandbox.command_timeout_ms;
      if (config.sandbox.use === "local") {
        if (!bits.runner) throw new DeerflowError("sandbox_unavailable", 'sandbox.use "local" runs host processes, which this entry cannot start; use the virtual sandbox.');
        return createLocalSandboxProvider({ rootDir: resolve(config.storage.base), runner: bits.runner, defaultTimeoutMs });
      }
      return createVirtualSandboxProvider({ storage, defaultTimeoutMs, ...(bits.sandboxWorkers ? { workers: bits.sandboxWorkers, maxWorkers: config.sandbox.max_workers } : {}) });
    },
  };
}
