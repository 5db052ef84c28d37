// The cluster the acceptance suite (and bench/cluster) drives: one real PostgreSQL
// (test/support/embedded-postgres.ts), gateway workers started through the real CLI (`serve`) on
// Node, Deno and Bun over it, the round-robin proxy in front (proxy.ts), the scripted model
// (scripted-model.ts) and the run counter its count_run tool reports to (counter.ts), all on
// loopback. Node only: the test process spawns the database and the workers.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@langchain/langgraph-sdk";
import pg from "pg";
import { startCli, type CliRuntime, type CliServer } from "../portable/gateway/cli-server.ts";
import { startTestPostgres, type TestPostgres } from "../support/embedded-postgres.ts";
import { startRunCounter, type RunCounter } from "./counter.ts";
import { PIN_HEADER, startProxy, type ClusterProxy } from "./proxy.ts";
import { startScriptedModel, type ScriptedModel } from "./scripted-model.ts";

/** The Deno worker's flags: Deploy's permissions minus KV, and the abort behaviour the CLI is written for. */
export const CLUSTER_DENO_FLAGS = ["--allow-net", "--allow-env", "--allow-read", "--unstable-no-legacy-abort"] as const;

export const DEFAULT_RUNTIMES: readonly CliRuntime[] = ["node", "deno", "bun"];

const PLUGIN = fileURLToPath(new URL("./count-run-plugin.ts", import.meta.url));
/** The variable the workers' model config names for its key (any value: the scripted model checks none). */
export const MODEL_KEY_ENV = "SCRIPTED_MODEL_KEY";

export interface ClusterOptions {
  /** One worker per entry, in this order (default node, deno, bun). */
  readonly runtimes?: readonly CliRuntime[];
  /** storage.lease_ms (default 3000): short, so a dead worker's runs are swept within seconds. */
  readonly leaseMs?: number;
  /** storage.lease_grace_ms (default 1000). */
  readonly leaseGraceMs?: number;
  /** The scripted model's wait per call unless a run's `#delay=` says otherwise (default 0). */
  readonly modelDelayMs?: number;
  /** Top-level config.yaml keys merged over the harness's (gateway.auth, memory, ...). */
  readonly config?: Record<string, unknown>;
  /** More environment for every worker (API keys named by `*_env` keys, say). */
  readonly env?: Record<string, string>;
  readonly denoFlags?: readonly string[];
  /** An existing database instead of a fresh embedded PostgreSQL (the harness then leaves it running). */
  readonly databaseUrl?: string;
}

export interface ClusterWorker {
  readonly index: number;
  readonly runtime: CliRuntime;
  /** What this worker's count_run calls carry as `worker` (`<index>-<runtime>`). */
  readonly label: string;
  /** The running process; undefined once it was killed or terminated and not restarted. */
  readonly server: CliServer | undefined;
  /** False while it is killed, stopped or terminating: the proxy skips it. */
  readonly up: boolean;
  /** Its own address (no proxy). */
  readonly url: string | undefined;
  readonly configPath: string;
}

export interface Cluster {
  readonly workers: readonly ClusterWorker[];
  readonly proxy: ClusterProxy;
  readonly model: ScriptedModel;
  readonly counter: RunCounter;
  /** The cluster's database (undefined when `databaseUrl` was given). */
  readonly postgres: TestPostgres | undefined;
  readonly databaseUrl: string;
  /** A pool on the cluster's database, for checks the API does not show (orphaned checkpoints). */
  readonly pool: pg.Pool;
  /** <proxy>/api */
  readonly apiUrl: string;
  /** The SDK against the proxy (round-robin). */
  readonly client: Client;
  /** The SDK pinned to one worker (through the proxy, with the pin header). */
  clientFor(index: number): Client;
  /** Headers that pin a raw fetch through the proxy to one worker. */
  pin(index: number): Record<string, string>;
  /** SIGKILL, wait for the process to be gone; the proxy skips it from now on. */
  kill(index: number): Promise<void>;
  /** SIGSTOP: the process keeps its sockets but answers nothing; the proxy skips it. */
  pause(index: number): void;
  /** SIGCONT after pause(); the proxy sends to it again. */
  resume(index: number): void;
  /** SIGTERM (the proxy skips it at once, as a load balancer draining a node); settles when the process has exited. */
  terminate(index: number): Promise<void>;
  /** Starts a stopped worker again with its config (same index, new port). */
  restart(index: number): Promise<ClusterWorker>;
  /** Starts one more worker over the same database; it joins the proxy's rotation. */
  addWorker(runtime: CliRuntime): Promise<ClusterWorker>;
  /** Every worker's output so far, labelled (for failure messages). */
  output(): string;
  /** Milliseconds from startCluster's call until every worker listened. */
  readonly startMs: number;
}

interface WorkerSlot {
  index: number;
  runtime: CliRuntime;
  label: string;
  server: CliServer | undefined;
  up: boolean;
  configPath: string;
  /** Output of processes of this slot that are gone. */
  past: string;
}

interface ClusterState {
  dir: string;
  slots: WorkerSlot[];
  stopped: boolean;
}

const states = new WeakMap<Cluster, ClusterState>();

/** One worker's config.yaml (as an object): the scripted model, PostgreSQL storage, the count_run plugin labelled for it. */
export function workerConfig(label: string, model: ScriptedModel, counter: RunCounter, options: ClusterOptions = {}): Record<string, unknown> {
  return {
    models: [{ name: "scripted", use: "openai-compatible", model: "scripted", base_url: model.baseUrl, api_key_env: MODEL_KEY_ENV, timeout_ms: 60_000 }],
    default_model: "scripted",
    storage: { driver: "postgres", url_env: "DATABASE_URL", lease_ms: options.leaseMs ?? 3000, lease_grace_ms: options.leaseGraceMs ?? 1000 },
    // Off unless a scenario turns them on: each is one more model call per run the script would answer.
    title: { enabled: false },
    memory: { enabled: false },
    // The script repeats the same tool calls run after run by design; LoopDetection would stop them.
    loop_detection: { enabled: false },
    plugins: [{ name: "count_run", use: `${PLUGIN}:install`, config: { url: counter.url, worker: label } }],
    ...options.config,
  };
}

export async function startCluster(options: ClusterOptions = {}): Promise<Cluster> {
  const started = performance.now();
  const dir = await mkdtemp(join(tmpdir(), "deerflow-cluster-"));
  const undo: Array<() => Promise<void>> = [async () => rm(dir, { recursive: true, force: true })];
  try {
    const postgres = options.databaseUrl === undefined ? await startTestPostgres() : undefined;
    if (postgres) undo.push(() => postgres.stop());
    const databaseUrl = options.databaseUrl ?? postgres!.url;
    const [model, counter] = await Promise.all([startScriptedModel({ delayMs: options.modelDelayMs ?? 0 }), startRunCounter()]);
    undo.push(model.close, counter.close);
    const pool = new pg.Pool({ connectionString: databaseUrl, max: 4 });
    // An idle client losing its server (PostgreSQL stopping at the end) is no test failure.
    pool.on("error", () => undefined);
    undo.push(() => pool.end());
    const env = { DATABASE_URL: databaseUrl, [MODEL_KEY_ENV]: "scripted-key", ...options.env };
    const slots: WorkerSlot[] = [];
    const proxy = await startProxy(() => slots.map((slot) => ({ url: slot.server?.url, up: slot.up })));
    undo.push(proxy.close);

    const state: ClusterState = { dir, slots, stopped: false };
    const launch = async (slot: WorkerSlot): Promise<void> => {
      slot.server = await startCli(slot.runtime, slot.configPath, env, { denoFlags: options.denoFlags ?? CLUSTER_DENO_FLAGS });
      slot.up = true;
    };
    const addSlot = async (runtime: CliRuntime): Promise<WorkerSlot> => {
      const index = slots.length;
      const label = `${index}-${runtime}`;
      const configPath = join(dir, `worker-${index}.yaml`);
      // Taken before the first await: slots are added side by side.
      const slot: WorkerSlot = { index, runtime, label, server: undefined, up: false, configPath, past: "" };
      slots.push(slot);
      // JSON is YAML.
      await writeFile(configPath, JSON.stringify(workerConfig(label, model, counter, options)));
      return slot;
    };
    const view = (slot: WorkerSlot): ClusterWorker => ({
      index: slot.index,
      runtime: slot.runtime,
      label: slot.label,
      configPath: slot.configPath,
      get server() {
        return slot.server;
      },
      get up() {
        return slot.up;
      },
      get url() {
        return slot.server?.url;
      },
    });
    const slotOf = (index: number): WorkerSlot => {
      const slot = slots[index];
      if (slot === undefined) throw new Error(`the cluster has no worker ${index} (0..${slots.length - 1})`);
      return slot;
    };
    const retire = (slot: WorkerSlot) => {
      slot.past += slot.server?.output() ?? "";
      slot.server = undefined;
    };

    const initial = await Promise.all((options.runtimes ?? DEFAULT_RUNTIMES).map((runtime) => addSlot(runtime)));
    // All at once, as a deployment starts them: the schema migration must be safe under that.
    const launched = await Promise.allSettled(initial.map(launch));
    undo.push(async () => void (await Promise.all(slots.map((slot) => slot.server?.kill()))));
    const failed = launched.flatMap((result, i) => (result.status === "rejected" ? [`${initial[i]!.label}: ${String(result.reason)}`] : []));
    if (failed.length > 0) throw new Error(`cluster workers did not start:\n${failed.join("\n")}`);

    const pinHeaders = (index: number) => ({ [PIN_HEADER]: String(index) });
    const sdk = (headers: Record<string, string>) => new Client({ apiUrl: `${proxy.url}/api`, defaultHeaders: headers, callerOptions: { maxRetries: 0 } });
    const cluster: Cluster = {
      get workers() {
        return slots.map(view);
      },
      proxy,
      model,
      counter,
      postgres,
      databaseUrl,
      pool,
      apiUrl: `${proxy.url}/api`,
      client: sdk({}),
      clientFor: (index) => (slotOf(index), sdk(pinHeaders(index))),
      pin: (index) => (slotOf(index), pinHeaders(index)),
      async kill(index) {
        const slot = slotOf(index);
        slot.up = false;
        await slot.server?.kill();
        retire(slot);
      },
      pause(index) {
        const slot = slotOf(index);
        slot.up = false;
        slot.server?.child.kill("SIGSTOP");
      },
      resume(index) {
        const slot = slotOf(index);
        slot.server?.child.kill("SIGCONT");
        slot.up = slot.server !== undefined;
      },
      async terminate(index) {
        const slot = slotOf(index);
        slot.up = false;
        const server = slot.server;
        if (server === undefined) return;
        server.child.kill("SIGTERM");
        await server.exited;
        retire(slot);
      },
      async restart(index) {
        const slot = slotOf(index);
        if (slot.server !== undefined) throw new Error(`worker ${slot.label} is still running; kill or terminate it first`);
        await launch(slot);
        return view(slot);
      },
      async addWorker(runtime) {
        const slot = await addSlot(runtime);
        await launch(slot);
        return view(slot);
      },
      output: () => slots.map((slot) => `--- worker ${slot.label}\n${slot.past}${slot.server?.output() ?? ""}`).join("\n"),
      startMs: performance.now() - started,
    };
    states.set(cluster, state);
    return cluster;
  } catch (error) {
    for (const step of undo.reverse()) await step().catch(() => undefined);
    throw error;
  }
}

/** Kills every worker (SIGCONT first for a paused one), closes the proxy, model and counter, stops PostgreSQL. */
export async function stopCluster(cluster: Cluster | undefined): Promise<void> {
  if (cluster === undefined) return;
  const state = states.get(cluster);
  if (state === undefined || state.stopped) return;
  state.stopped = true;
  await Promise.all(
    state.slots.map(async (slot) => {
      // A stopped process takes SIGKILL too, but its exit is only reported once it runs again.
      slot.server?.child.kill("SIGCONT");
      await slot.server?.kill();
    }),
  );
  await Promise.allSettled([cluster.proxy.close(), cluster.model.close(), cluster.counter.close(), cluster.pool.end()]);
  await cluster.postgres?.stop();
  await rm(state.dir, { recursive: true, force: true });
}
