// @modelcontextprotocol/sdk's "./*" export maps types to "*.js.d.ts", which Deno and JSR take literally
// (modelcontextprotocol/typescript-sdk#2701); each @ts-types names the real declarations, tsc ignores it.
// @ts-types="@modelcontextprotocol/sdk/client/stdio"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { McpStdioLaunch, McpStdioTransport, McpStdioTransportFactory } from "../../src/ports/mcp-transport.ts";

/*
 * The McpStdioTransportFactory port on Node, Deno and Bun: the SDK's stdio client transport runs on
 * node:child_process, which all three provide. stderr is piped instead of inherited so a chatty
 * server cannot interleave with the host's own output, and its tail is kept because "the process
 * exited" alone rarely tells an operator why a server failed to start.
 */

const STDERR_TAIL_CHARS = 2000;

class TailingStdioTransport extends StdioClientTransport implements McpStdioTransport {
  #tail = "";

  constructor(launch: McpStdioLaunch) {
    super({
      command: launch.command,
      args: [...launch.args],
      env: { ...launch.env },
      ...(launch.cwd === undefined ? {} : { cwd: launch.cwd }),
      stderr: "pipe",
    });
    // The piped stream exists before start(), so nothing the process writes early is lost.
    this.stderr?.on("data", (chunk: Uint8Array | string) => {
      this.#tail = (this.#tail + (typeof chunk === "string" ? chunk : new TextDecoder().decode(chunk))).slice(-STDERR_TAIL_CHARS);
    });
  }

  stderrTail(): string {
    return this.#tail.trim();
  }
}

export function createMcpStdioTransportFactory(): McpStdioTransportFactory {
  return { create: (launch) => new TailingStdioTransport(launch) };
}
