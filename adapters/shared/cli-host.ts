import { readFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import type { CliHost, CliOutput } from "../../src/cli/host.ts";
import { systemClock } from "../../src/core/clock.ts";
import type { ServeFetch } from "../../src/ports/http-server.ts";
import type { Env, ProcessRunner } from "../../src/ports/runtime-ports.ts";
import { createVirtualSandboxProvider } from "../../src/sandbox/virtual.ts";
import { createLocalSandboxProvider } from "./local-sandbox.ts";
import { createFsDriver } from "./fs-key-value.ts";
import { createModuleLoader } from "./module-loader.ts";
import { createMcpStdioTransportFactory } from "./mcp-stdio.ts";
import { createKeyValue } from "./storage.ts";

export interface RuntimeBits {
  readonly argv: readonly string[];
  readonly env: Env;
  readonly runner: ProcessRunner;
  readonly stdout: CliOutput;
  readonly stderr: CliOutput;
  readonly onInterrupt: (handler: () => void) => () => void;
  readonly serve: ServeFetch;
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
    createModuleLoader: (baseDir) => createModuleLoader({ baseDir }),
    mcpStdio: createMcpStdioTransportFactory(),
    dirname,
    async readFile(path) {
      try {
        return await readFile(path, "utf8");
      } catch (error) {
        if ((error as { code?: string }).code === "ENOENT") return undefined;
        throw error;
      }
    },
    createStorage(config, options) {
      const storage = createKeyValue(config.driver === "fs" ? { driver: "fs", base: resolve(config.base) } : { driver: "memory" });
      if (options?.skillsDir) storage.mount("skills", createFsDriver(resolve(options.skillsDir), { readOnly: true }));
      return storage;
    },
    createSandboxProvider(config, storage) {
      if (config.sandbox.use === "local") {
        return createLocalSandboxProvider({ rootDir: resolve(config.storage.base), runner: bits.runner });
      }
      return createVirtualSandboxProvider({ storage });
    },
  };
}
