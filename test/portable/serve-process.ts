// The real CLI (`deerflow-edge serve`) of the runtime running this file, in a child process: what a
// user starts, fresh module graph and all. Node runs the npm bin, Deno the README's command with its
// permission flags, Bun the adapter's entry.
import { spawn, type ChildProcess } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

export type RuntimeName = "node" | "deno" | "bun";

export function currentRuntime(): RuntimeName {
  const globals = globalThis as { Deno?: unknown; Bun?: unknown };
  return globals.Deno ? "deno" : globals.Bun ? "bun" : "node";
}

/** The command line that runs `adapters/<runtime>/cli.ts` with `args` on `runtime`. */
export function cliCommand(runtime: RuntimeName, args: readonly string[]): { command: string; args: string[] } {
  const execPath = (globalThis as { Deno?: { execPath(): string } }).Deno?.execPath() ?? process.execPath;
  switch (runtime) {
    case "node":
      // The npm bin: it registers tsx from the package's own node_modules.
      return { command: process.execPath, args: [join(root, "bin/deerflow-edge.mjs"), ...args] };
    case "deno":
      return {
        command: execPath,
        args: ["run", "--config", join(root, "deno.json"), "--allow-read", "--allow-write", "--allow-env", "--allow-net", "--allow-sys=homedir", "--unstable-no-legacy-abort", join(root, "adapters/deno/cli.ts"), ...args],
      };
    case "bun":
      return { command: execPath, args: [join(root, "adapters/bun/cli.ts"), ...args] };
  }
}

export interface ServedCli {
  readonly url: string;
  readonly child: ChildProcess;
  /** Everything the process printed so far (stdout and stderr). */
  output(): string;
  /** Sends `signal` and waits for the process to exit. */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/** Starts `serve --port 0 ...args` and resolves with its URL once it listens (or rejects with its output). */
export async function serveCli(options: { cwd: string; args?: readonly string[]; env?: Record<string, string>; timeoutMs?: number }): Promise<ServedCli> {
  const { command, args } = cliCommand(currentRuntime(), ["serve", "--port", "0", ...(options.args ?? [])]);
  const child = spawn(command, args, { cwd: options.cwd, env: { ...process.env, NO_COLOR: "1", ...options.env }, stdio: ["ignore", "pipe", "pipe"] });
  let text = "";
  child.stdout!.on("data", (chunk: Buffer) => (text += chunk.toString()));
  child.stderr!.on("data", (chunk: Buffer) => (text += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not listen within ${options.timeoutMs ?? 30_000} ms:\n${text}`)), options.timeoutMs ?? 30_000);
    const check = () => {
      const found = /deerflow-edge gateway · (http:\/\/[^\s]+) ·/.exec(text)?.[1];
      if (found) {
        clearTimeout(timer);
        resolve(found);
      }
    };
    child.stdout!.on("data", check);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`serve exited with ${code} before listening:\n${text}`));
    });
  });
  return {
    url,
    child,
    output: () => text,
    stop: async (signal = "SIGTERM") => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}
