import { readFile } from "node:fs/promises";
import process from "node:process";
import { createInterface } from "node:readline";
import { dirname } from "node:path";
import type { CliHost, CliOutput } from "../../src/cli/host.ts";
import type { ServeFetch } from "../../src/ports/http-server.ts";
import type { ProcessRunner } from "../../src/ports/runtime-ports.ts";
import type { SandboxWorkerPort } from "../../src/ports/sandbox-worker.ts";
import { createExtensionManagerHost, writeFileAtomic } from "./extension-manager-host.ts";
import { createGatewayHost, type GatewayBits } from "./gateway-host.ts";
import { createMcpStdioTransportFactory } from "./mcp-stdio.ts";

export interface RuntimeBits extends GatewayBits {
  readonly argv: readonly string[];
  readonly runner: ProcessRunner;
  readonly stdout: CliOutput;
  readonly onInterrupt: (handler: () => void) => () => void;
  readonly serve: ServeFetch;
  readonly sandboxWorkers: SandboxWorkerPort;
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
    ...createGatewayHost(bits),
    argv: bits.argv,
    stdout: bits.stdout,
    onInterrupt: bits.onInterrupt,
    serve: bits.serve,
    mcpStdio: createMcpStdioTransportFactory(),
    dirname,
    createExtensionManagerHost: () => createExtensionManagerHost({ onInterrupt: bits.onInterrupt }),
    readLine: readStdinLine,
    writeFileAtomic,
    async readFile(path) {
      try {
        return await readFile(path, "utf8");
      } catch (error) {
        if ((error as { code?: string }).code === "ENOENT") return undefined;
        throw error;
      }
    },
  };
}
