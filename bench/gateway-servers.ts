/**
 * The processes bench/gateway.ts drives: the load process (always Node through tsx), the official
 * LangGraph API server (bench/lgapi, Node through its own tsx, installed on first use), and
 * deerflow-edge's gateway in a process of its own for the memory figures. Runs under Node, Deno
 * (-A) and Bun: node:child_process and node:fs exist on all three.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import type { CheckResult, LoadJob, LoadResult, PopulateResult } from "./gateway-load.ts";
import type { Target } from "./gateway-sse.ts";
import type { Runtime } from "./harness.ts";

export const ROOT = fileURLToPath(new URL("..", import.meta.url));
const LGAPI_DIR = join(ROOT, "bench", "lgapi");
const LOAD_SCRIPT = join(ROOT, "bench", "gateway-load.ts");
const ROOT_TSX = join(ROOT, "node_modules", ".bin", "tsx");
const LGAPI_TSX = join(LGAPI_DIR, "node_modules", ".bin", "tsx");
/** Our lead agent as a graph for langgraph-api (bench/lead-agent.ts). */
const LEAD_GRAPH = join(ROOT, "bench", "lead-agent.ts");
const LGAPI_MARKER = join(LGAPI_DIR, "node_modules", "@langchain", "langgraph-api", "package.json");

const g = globalThis as any;

/** This process's environment (Node and Bun: process.env; Deno: Deno.env). */
export function currentEnv(): Record<string, string> {
  if (g.Deno?.env?.toObject) return g.Deno.env.toObject();
  return { ...(g.process?.env ?? {}) };
}

export function forwardLines(stream: NodeJS.ReadableStream | null, prefix: string): void {
  if (stream === null) return;
  createInterface({ input: stream }).on("line", (line) => console.error(`${prefix}${line}`));
}

/** Runs a child to its end; its stdout returned, its stderr forwarded with a prefix. */
function runChild(command: string, args: string[], options: { cwd?: string; env?: Record<string, string>; label: string }): Promise<{ code: number | null; stdout: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd ?? ROOT, env: options.env ?? currentEnv(), stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    child.stdout!.setEncoding("utf8");
    child.stdout!.on("data", (chunk: string) => (stdout += chunk));
    forwardLines(child.stderr, `  [${options.label}] `);
    child.once("error", reject);
    child.once("close", (code) => resolve({ code, stdout }));
  });
}

// ---------------------------------------------------------------------------------------------
// The load process

export async function runLoad(job: Extract<LoadJob, { mode: "check" }>): Promise<CheckResult>;
export async function runLoad(job: Extract<LoadJob, { mode: "load" }>): Promise<LoadResult>;
export async function runLoad(job: Extract<LoadJob, { mode: "populate" }>): Promise<PopulateResult>;
export async function runLoad(job: LoadJob): Promise<CheckResult | LoadResult | PopulateResult> {
  const { code, stdout } = await runChild(ROOT_TSX, [LOAD_SCRIPT, JSON.stringify(job)], { label: `load ${job.mode}` });
  const line = stdout.split("\n").filter((l) => l.startsWith("{")).at(-1);
  if (code !== 0 || line === undefined) throw new Error(`the load process (${job.mode}) exited ${code} without a result; its stderr is above`);
  return JSON.parse(line);
}

// ---------------------------------------------------------------------------------------------
// Servers in a child process

/** A server in its own process, speaking the stdio protocol of bench/lgapi/serve.ts. */
export interface ChildServer {
  readonly target: Target;
  /** Heap and RSS of the server process, after a full collection. */
  memory(): Promise<{ heap_used: number; rss: number }>;
  close(): Promise<void>;
}

/**
 * Starts `command args` and waits for its `{"bench_server":"listening","url":...}` line; other
 * stdout lines (a server's own log) go to stderr with the label. `cleanup` runs after it exited.
 */
export async function startChildServer(spec: {
  command: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  label: string;
  assistantId: string;
  /** Appended to the listening URL: the LangGraph API's base path. */
  apiPath: string;
  cleanup?: () => void;
}): Promise<ChildServer> {
  const child: ChildProcess = spawn(spec.command, spec.args, { cwd: spec.cwd, env: spec.env, stdio: ["pipe", "pipe", "pipe"] });
  forwardLines(child.stderr, `  [${spec.label}] `);

  const waiting = new Map<string, (record: Record<string, unknown>) => void>();
  let exited = false;
  const exit = new Promise<void>((resolve) => {
    child.once("close", () => ((exited = true), resolve()));
    child.once("error", (error) => {
      console.error(`  [${spec.label}] could not start: ${error.message}`);
      exited = true;
      resolve();
    });
  });
  createInterface({ input: child.stdout! }).on("line", (line) => {
    let record: Record<string, unknown> | undefined;
    try {
      record = line.startsWith("{") ? JSON.parse(line) : undefined;
    } catch {
      record = undefined;
    }
    const kind = record?.["bench_server"];
    if (typeof kind === "string" && waiting.has(kind)) {
      const resolve = waiting.get(kind)!;
      waiting.delete(kind);
      resolve(record!);
    } else if (kind === "failed") {
      console.error(`  [${spec.label}] failed: ${String(record!["error"])}`);
    } else {
      console.error(`  [${spec.label}] ${line}`);
    }
  });
  const next = (kind: string, timeoutMs: number): Promise<Record<string, unknown>> =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        waiting.delete(kind);
        reject(new Error(`${spec.label} sent no "${kind}" line within ${timeoutMs} ms`));
      }, timeoutMs);
      waiting.set(kind, (record) => {
        clearTimeout(timer);
        resolve(record);
      });
      void exit.then(() => {
        if (waiting.has(kind)) {
          clearTimeout(timer);
          waiting.delete(kind);
          reject(new Error(`${spec.label} exited before "${kind}"; its output is above`));
        }
      });
    });

  const close = async (): Promise<void> => {
    if (!exited) {
      child.stdin!.end("exit\n");
      const killer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exit;
      clearTimeout(killer);
    }
    spec.cleanup?.();
  };

  try {
    const listening = await next("listening", 60_000);
    return {
      target: { apiUrl: `${String(listening["url"])}${spec.apiPath}`, assistantId: typeof listening["assistant_id"] === "string" ? listening["assistant_id"] : spec.assistantId },
      memory: async () => {
        const reply = next("memory", 30_000);
        child.stdin!.write("memory\n");
        const record = await reply;
        return { heap_used: Number(record["heap_used"]), rss: Number(record["rss"]) };
      },
      close,
    };
  } catch (error) {
    if (!exited) child.kill("SIGKILL");
    await exit;
    spec.cleanup?.();
    throw error;
  }
}

// ---------------------------------------------------------------------------------------------
// The official LangGraph API server

/** Null when installed (or just installed); otherwise why the baseline cannot run. */
export async function ensureLgapiInstalled(log: (line: string) => void): Promise<string | null> {
  if (existsSync(LGAPI_MARKER)) return null;
  log("bench/lgapi is not installed: npm ci --prefix bench/lgapi (first use only)");
  try {
    const { code } = await runChild("npm", ["ci", "--prefix", LGAPI_DIR, "--no-audit", "--no-fund"], { label: "npm ci bench/lgapi" });
    if (code !== 0) return `npm ci --prefix bench/lgapi exited ${code}`;
  } catch (error) {
    return `npm ci --prefix bench/lgapi could not start: ${error instanceof Error ? error.message : String(error)}`;
  }
  return existsSync(LGAPI_MARKER) ? null : "npm ci --prefix bench/lgapi succeeded but @langchain/langgraph-api is missing";
}

/**
 * Starts bench/lgapi/serve.ts under Node with --expose-gc, serving its bare graph or (`lead`) our
 * lead agent (bench/lead-agent.ts), cwd and `.langgraph_api/` in a fresh
 * temp dir (removed on close), analytics off, and the log at warn (its per-request info log would
 * otherwise be part of what is measured, and deerflow-edge's gateway logs no line per request).
 */
export function startLgapi(workers: number, graph: "bare" | "lead" = "bare"): Promise<ChildServer> {
  const cwd = mkdtempSync(join(tmpdir(), "deerflow-bench-lgapi-"));
  return startChildServer({
    command: LGAPI_TSX,
    args: ["--expose-gc", join(LGAPI_DIR, "serve.ts"), "0", String(workers), cwd, ...(graph === "lead" ? [`${LEAD_GRAPH}:graph`] : [])],
    cwd,
    env: { ...currentEnv(), LANGGRAPH_CLI_NO_ANALYTICS: "1", LOG_LEVEL: "warn", BROWSER: "none" },
    label: "lgapi",
    assistantId: "agent",
    apiPath: "",
    cleanup: () => rmSync(cwd, { recursive: true, force: true }),
  });
}

/**
 * deerflow-edge's gateway in a child process of the bench's own runtime (bench/gateway-serve.ts),
 * for the memory figures: a process that served nothing else.
 */
export function startOursProcess(runtime: Runtime): Promise<ChildServer> {
  const script = join(ROOT, "bench", "gateway-serve.ts");
  const [command, args] =
    runtime === "deno"
      ? [String(g.Deno.execPath()), ["run", "-A", "--unstable-no-legacy-abort", "--v8-flags=--expose-gc", script]]
      : runtime === "bun"
        ? [String(g.process.execPath), [script]]
        : [ROOT_TSX, ["--expose-gc", script]];
  return startChildServer({ command, args, cwd: ROOT, env: currentEnv(), label: `deerflow-edge ${runtime}`, assistantId: "lead_agent", apiPath: "/api" });
}
