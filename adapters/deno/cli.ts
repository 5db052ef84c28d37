// AsyncLocalStorage first: LangGraph's interrupt() reads its config from it
// (docs/toolchain.md, AsyncLocalStorage in every entry).
import "../shared/als.ts";
// Before any run: langsmith's profile lookup must not need --allow-sys=homedir.
import "./langsmith-profile.ts";
import "./quiet-sandbox-notes.ts";
import { main } from "../../src/cli/main.ts";
import { createCliHost } from "../shared/cli-host.ts";
import { createWebSandboxWorkers } from "../shared/web-sandbox-worker.ts";
import { serveDeno } from "./serve.ts";
import { createDenoEnv } from "./env.ts";
import { reclaimV8Memory } from "../shared/v8-memory.ts";
import { createDenoProcessRunner } from "./process-runner.ts";
import { assertDenoMayWrite, createDenoKvKeyValue } from "./kv-key-value.ts";

declare const Deno: {
  args: string[];
  stdout: { writeSync(data: Uint8Array): number; isTerminal(): boolean };
  stderr: { writeSync(data: Uint8Array): number; isTerminal(): boolean };
  addSignalListener(signal: "SIGINT" | "SIGTERM", handler: () => void): void;
  removeSignalListener(signal: "SIGINT" | "SIGTERM", handler: () => void): void;
  exit(code: number): never;
};

const encoder = new TextEncoder();
function writer(stream: typeof Deno.stdout) {
  return {
    write(text: string) {
      const bytes = encoder.encode(text);
      let offset = 0;
      while (offset < bytes.length) offset += stream.writeSync(bytes.subarray(offset));
    },
    isTTY: stream.isTerminal(),
  };
}

const code = await main(
  createCliHost({
    argv: Deno.args,
    env: createDenoEnv(),
    runner: createDenoProcessRunner(),
    sandboxWorkers: createWebSandboxWorkers(),
    stdout: writer(Deno.stdout),
    stderr: writer(Deno.stderr),
    onInterrupt(handler) {
      Deno.addSignalListener("SIGINT", handler);
      Deno.addSignalListener("SIGTERM", handler);
      return () => {
        Deno.removeSignalListener("SIGINT", handler);
        Deno.removeSignalListener("SIGTERM", handler);
      };
    },
    serve: serveDeno,
    reclaimMemory: reclaimV8Memory,
    keyValues: { denoKv: createDenoKvKeyValue, assertFsWritable: assertDenoMayWrite },
  }),
);
Deno.exit(code);
