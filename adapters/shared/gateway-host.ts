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
import { createFsDeploymentFiles } from "./fs-deployment-files.ts";
import { createModuleLoader } from "./module-loader.ts";
import { createKeyValue, type RuntimeKeyValues } from "./storage.ts";
import { PostgresStorageError } from "./postgres/errors.ts";
import { DEFAULT_LEASE_GRACE_MS, DEFAULT_LEASE_MS, DEFAULT_POOL_MAX } from "../../src/config/schema.ts";

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
            ? { driver: "deno-kv", path: denoKvPath(config.path) }
            : { driver: "memory" },
        bits.keyValues,
      );
      if (options?.skillsDir) storage.mount("skills", createFsDriver(resolve(options.skillsDir), { readOnly: true }));
      return storage;
    },
    async openSharedStorage(config, options) {
      if (config.driver === "deno-kv") {
        const opened = await bits.keyValues?.denoKvShared?.({ path: denoKvPath(config.path) });
        if (opened && options?.skillsDir) opened.storage.mount("skills", createFsDriver(resolve(options.skillsDir), { readOnly: true }));
        return opened;
      }
      if (config.driver !== "postgres") return undefined;
      const name = config.url_env ?? "DATABASE_URL";
      const url = bits.env.get(name);
      if (!url) {
        throw new PostgresStorageError("database_url_missing", `storage.driver "postgres" reads its connection URL from ${name}, which is not set; set it to postgres://user:password@host:5432/database.`);
      }
      // Loaded only for this driver, so an entry that never names postgres never loads pg.
      const { openPostgresStorage } = await import("./postgres/open.ts");
      const opened = await openPostgresStorage({
        url,
        leaseMs: config.lease_ms ?? DEFAULT_LEASE_MS,
        poolMax: config.pool_max ?? DEFAULT_POOL_MAX,
        onIdleError: (error) => bits.stderr.write(`warning: a PostgreSQL connection closed (${error.message}); the pool opens a new one when needed.\n`),
      });
      if (options?.skillsDir) opened.storage.mount("skills", createFsDriver(resolve(options.skillsDir), { readOnly: true }));
      return {
        storage: opened.storage,
        versioned: opened.versioned,
        checkpointer: opened.checkpointer,
        coordination: { coordinator: opened.coordinator, bus: opened.bus, workerId: opened.workerId, leaseGraceMs: config.lease_grace_ms ?? DEFAULT_LEASE_GRACE_MS },
        close: () => opened.close(),
      };
    },
    createSkillsFolder: (skillsDir) => createFsDeploymentFiles(resolve(skillsDir), `the skills folder ${resolve(skillsDir)}`),
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

/** A Deno KV file against the working folder; a KV Connect URL or ":memory:" as written. */
function denoKvPath(path: string | undefined): string | undefined {
  return path === undefined || /^([a-z][a-z0-9+.-]*:\/\/|:memory:$)/i.test(path) ? path : resolve(path);
}
