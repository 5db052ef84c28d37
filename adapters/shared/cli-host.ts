import { readFile } from "node:fs/promises";
import process from "node:process";
import { createInterface } from "node:readline";
import { dirname, resolve } from "node:path";
import type { CliHost, CliOutput } from "../../src/cli/host.ts";
import { systemClock } from "../../src/core/clock.ts";
import type { ServeFetch } from "../../src/ports/http-server.ts";
import type { Env, ProcessRunner, ReclaimMemory } from "../../src/ports/runtime-ports.ts";
import type { SandboxWorkerPort } from "../../src/ports/sandbox-worker.ts";
import { createVirtualSandboxProvider } from "../../src/sandbox/virtual.ts";
import { createLocalSandboxProvider } from "./local-sandbox.ts";
import { createFsDriver } from "./fs-key-value.ts";
import { createExtensionManagerHost } from "./extension-manager-host.ts";
import { createModuleLoader } from "./module-loader.ts";
import { createMcpStdioTransportFactory } from "./mcp-stdio.ts";
import { createKeyValue, type RuntimeKeyValues } from "./storage.ts";

export interface RuntimeBits {
  readonly argv: readonly string[];
  readonly env: Env;
  readonly runner: ProcessRunner;
  readonly stdout: CliOutput;
  readonly stderr: CliOutput;
  readonly onInterrupt: (handler: () => void) => () => void;
  readonly serve: ServeFetch;
  readonly reclaimMemory?: ReclaimMemory;
  /** Where the virtual sandbox runs its commands, off the thread that serves requests. */
  readonly sandboxWorkers: SandboxWorkerPort;
  /** Drivers only this runtime has (Deno KV on Deno). */
  readonly keyValues?: RuntimeKeyValues;
}

/** One line of standard input (node:readline works on Node, Deno and Bun); undefined at its end. */
function readStdinLine(): Promise<string | undefined> {
  return new Promise((resolveLine) => {
    const lines = createInterface({ input: process.stdin, terminal: false });
    let settled = false;
    const finish = (value: string | undefined) => {
      if (settled) return;
      settled = true;
      lines.close();
      resolveLine(value);
    };
    lines.once("line", (line) => finish(line));
    lines.once("close", () => finish(undefined));
  });
}

/**
 * The CLI host every adapter shares: node:fs/promises exists on Node, Deno and Bun, so only
 * argv, env, the process runner, the terminal and Ctrl-C differ per runtime.
 */
export function createCliHost(bits: RuntimeBits): CliHost {
  return {
    argv: bits.argv,
    env: bits.env,
    clock: systemClock,
    stdout: bits.stdout,
    stderr: bits.stderr,
    onInterrupt: bits.onInterrupt,
    serve: bits.serve,
    ...(bits.reclaimMemory ? { reclaimMemory: bits.reclaimMemory } : {}),
    createModuleLoader: (baseDir) => createModuleLoader({ baseDir }),
    mcpStdio: createMcpStdioTransportFactory(),
    dirname,
    createExtensionManagerHost: () => createExtensionManagerHost({ onInterrupt: bits.onInterrupt }),
    readLine: readStdinLine,
    async readFile(path) {
      try {
        return await readFile(path, "utf8");
      } catch (error) {
        if ((error as { code?: string }).code === "ENOENT") return undefined;
        throw error;
      }
    },
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
        return createLocalSandboxProvider({ rootDir: resolve(config.storage.base), runner: bits.runner, defaultTimeoutMs });
      }
      return createVirtualSandboxProvider({ storage, defaultTimeoutMs, workers: bits.sandboxWorkers, maxWorkers: config.sandbox.max_workers });
    },
  };
}
