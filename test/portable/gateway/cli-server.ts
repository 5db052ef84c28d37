// The real CLI (`serve`) of the runtime this file runs under, as a child process on a free port
// with its own config: for tests and benches that kill it and start it again on the same storage.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");

export type CliRuntime = "node" | "deno" | "bun";

export function currentRuntime(): CliRuntime {
  const g = globalThis as { Deno?: unknown; Bun?: unknown };
  return g.Deno ? "deno" : g.Bun ? "bun" : "node";
}

/** README's Deno command: its permissions, not -A. */
export const DENO_CLI_FLAGS = ["--allow-read", "--allow-write", "--allow-env", "--allow-net", "--unstable-no-legacy-abort"] as const;

/** What Deno Deploy grants (plus Deno KV): no --allow-sys, --allow-write or --allow-run. */
export const DENO_DEPLOY_FLAGS = ["--allow-net", "--allow-env", "--allow-read", "--unstable-kv"] as const;

export interface CliOptions {
  /** Deno's permission flags for its CLI (default DENO_CLI_FLAGS). */
  readonly denoFlags?: readonly string[];
}

/** The bun binary the project installs (node_modules/.bin/bun), whatever runtime runs the test. */
export const BUN_BINARY = join(root, "node_modules/.bin/bun");

/**
 * The executable of `runtime`: the one running now when it is that runtime, else the one the
 * project installs (deno, bun) or `node` on PATH, so one test process can start all three.
 */
function executableOf(runtime: CliRuntime): string {
  const g = globalThis as { Deno?: { execPath(): string } };
  if (runtime === currentRuntime()) return g.Deno ? g.Deno.execPath() : process.execPath;
  return runtime === "deno" ? DENO_BINARY : runtime === "bun" ? BUN_BINARY : "node";
}

/** The command that runs `<runtime>'s CLI <command>` (see executableOf for which executable). */
export function cliCommand(runtime: CliRuntime, options: CliOptions = {}, command = "serve"): { command: string; args: string[] } {
  if (runtime === "deno") {
    const flags = options.denoFlags ?? DENO_CLI_FLAGS;
    return { command: executableOf("deno"), args: ["run", "--config", join(root, "deno.json"), ...flags, join(root, "adapters/deno/cli.ts"), command] };
  }
  if (runtime === "bun") return { command: executableOf("bun"), args: [join(root, "adapters/bun/cli.ts"), command] };
  // tsx's loader in this process rather than the tsx command, which would run the server in a
  // grandchild: a SIGKILL must reach the server itself, and its RSS be the server's.
  const loader = pathToFileURL(join(root, "node_modules/tsx/dist/loader.mjs")).href;
  return { command: executableOf("node"), args: ["--import", loader, join(root, "adapters/node/cli.ts"), command] };
}

export interface CliServer {
  readonly url: string;
  readonly child: ChildProcess;
  /** SIGKILL, and wait for the process to be gone. */
  kill(): Promise<void>;
  /** Settles once the process has exited (however it ended). */
  readonly exited: Promise<void>;
  /** What the server wrote so far (for failure messages). */
  output(): string;
}

export interface CliWorkspace {
  readonly dir: string;
  readonly configPath: string;
  start(): Promise<CliServer>;
  dispose(): Promise<void>;
}

/** A temp folder with a config (storage under it, plus `config`) to start the CLI against, again and again. */
export async function cliWorkspace(config: Record<string, unknown> = {}, env: Record<string, string> = {}, options: CliOptions = {}): Promise<CliWorkspace> {
  const dir = await mkdtemp(join(tmpdir(), "deerflow-cli-"));
  const configPath = join(dir, "config.yaml");
  // JSON is YAML.
  await writeFile(configPath, JSON.stringify({ storage: { driver: "fs", base: join(dir, "storage") }, ...config }));
  const running = new Set<CliServer>();
  return {
    dir,
    configPath,
    async start() {
      const server = await startCli(currentRuntime(), configPath, env, options);
      running.add(server);
      return server;
    },
    async dispose() {
      await Promise.all([...running].map((server) => server.kill()));
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** What the CLI's serve prints once it listens; the URL is the first group. */
const CLI_URL = /deerflow-edge gateway · (http:\/\/[^\s]+)/;

/** `<runtime>'s CLI serve --config <configPath>` on a free loopback port, once it listens. */
export async function startCli(runtime: CliRuntime, configPath: string, env: Record<string, string>, options: CliOptions = {}): Promise<CliServer> {
  const { command, args } = cliCommand(runtime, options);
  return spawnServer(`${runtime} CLI`, command, [...args, "--port", "0", "--host", "127.0.0.1", "--config", configPath], {
    cwd: dirname(configPath),
    env,
    url: CLI_URL,
  });
}

/** The deno binary the project installs (node_modules/.bin/deno), whatever runtime runs the test. */
export const DENO_BINARY = join(root, "node_modules/.bin/deno");

/** `deno serve` of the Deno Deploy entry, with Deploy's permissions (DENO_DEPLOY_FLAGS) unless told otherwise. */
export function denoDeployCommand(options: CliOptions = {}): { command: string; args: string[] } {
  const flags = options.denoFlags ?? DENO_DEPLOY_FLAGS;
  return { command: DENO_BINARY, args: ["serve", "--config", join(root, "deno.json"), ...flags, "--host", "127.0.0.1", "--port", "0", join(root, "deploy/deno-deploy.ts")] };
}

/**
 * deploy/deno-deploy.ts under `deno serve` on a free port, configured by `env` only (plus PATH,
 * HOME and DENO_DIR from this process; nothing else leaks in), from an empty working folder.
 */
export async function startDenoDeploy(env: Record<string, string>, options: CliOptions & { cwd: string }): Promise<CliServer> {
  const { command, args } = denoDeployCommand(options);
  const inherited = Object.fromEntries(["PATH", "HOME", "DENO_DIR"].flatMap((name) => (process.env[name] === undefined ? [] : [[name, process.env[name]!]])));
  return spawnServer("deno serve deploy/deno-deploy.ts", command, args, { cwd: options.cwd, env: { ...inherited, ...env }, url: /Listening on (http:\/\/[^\s/]+)/, inheritEnv: false });
}

/** A `serve` command (a compiled binary, say) as a child process with exactly `env`, once it printed its URL. */
export function startServe(command: string, args: readonly string[], options: { cwd: string; env: Record<string, string>; label: string }): Promise<CliServer> {
  return spawnServer(options.label, command, args, { cwd: options.cwd, env: options.env, url: CLI_URL, inheritEnv: false });
}

/** A command as a child process to its end (killed after 90 s): exit code and everything it printed. */
export function runToExit(command: string, args: readonly string[], options: { cwd: string; env: Record<string, string | undefined> }): Promise<{ code: number | null; out: string }> {
  return new Promise((resolveRun, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, env: { ...options.env, NO_COLOR: "1" }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout!.on("data", (chunk: Buffer) => (out += chunk.toString()));
    child.stderr!.on("data", (chunk: Buffer) => (out += chunk.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), 90_000);
    child.once("error", reject);
    child.once("exit", (code) => {
      clearTimeout(timer);
      resolveRun({ code, out });
    });
  });
}

/** A server process, resolved once its output names the URL it listens on (the pattern's first group). */
async function spawnServer(
  what: string,
  command: string,
  args: readonly string[],
  options: { cwd: string; env: Record<string, string>; url: RegExp; inheritEnv?: boolean },
): Promise<CliServer> {
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: { ...(options.inheritEnv === false ? {} : process.env), ...options.env, NO_COLOR: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  const exited = new Promise<void>((resolveExit) => child.once("exit", () => resolveExit()));
  const url = await new Promise<string>((resolveUrl, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} did not print its URL within 60 s:\n${out}`)), 60_000);
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      const match = options.url.exec(out);
      if (match) {
        clearTimeout(timer);
        resolveUrl(match[1]!);
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited (${code}) before listening:\n${out}`));
    });
  });
  return {
    url,
    child,
    exited,
    output: () => out,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    },
  };
}
