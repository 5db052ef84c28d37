// The Cloudflare Workers build served locally by workerd (the Workers runtime, from the workerd
// npm package), for tests and benches: build the modules (scripts/build-worker.mjs), write a capnp
// config with one worker per spec (each on its own 127.0.0.1 port, its DEERFLOW_CONFIG and secrets
// as text bindings, nodejs_compat) and start `workerd serve`.
import { execFile, spawn } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

/** The platform binary the workerd package resolves (its default export). */
const WORKERD_BINARY: string = (createRequire(import.meta.url)("workerd") as { default: string }).default;

const exec = promisify(execFile);
const repo = fileURLToPath(new URL("../../..", import.meta.url));
const MINUTE = 60_000;

/** One worker: the config it gets as DEERFLOW_CONFIG (as JSON; none when unset) and its other text bindings. */
export interface WorkerSpec {
  readonly config?: unknown;
  readonly secrets?: Readonly<Record<string, string>>;
}

export interface Workerd<N extends string> {
  /** Each worker's base URL, by the spec's name. */
  readonly urls: Readonly<Record<N, string>>;
  /** What workerd printed so far. */
  output(): string;
  /** SIGKILL, and wait for the process to be gone. */
  kill(): Promise<void>;
}

/** Builds the Worker's modules (or another entry's, built the same way) into `outdir`; resolves to their names, the entry first. */
export async function buildWorkerModules(outdir: string, entry?: string): Promise<string[]> {
  const args = [join(repo, "scripts/build-worker.mjs"), "--outdir", outdir, ...(entry ? ["--entry", entry] : [])];
  const built = await exec("node", args, { cwd: repo, timeout: 3 * MINUTE });
  return built.stdout.trim().split("\n");
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", () => done()));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((done) => server.close(() => done()));
  return port;
}

/** A capnp text literal (the config holds JSON; JSON's escapes are capnp's). */
const capnpText = (value: string) => JSON.stringify(value);

/**
 * `workerd serve` in `dir` over the modules in `dir/<modulesDir>`, one worker per spec; resolves
 * once every worker answered a request (the first request builds its gateway).
 */
export async function startWorkerd<N extends string>(dir: string, modulesDir: string, modules: readonly string[], specs: Readonly<Record<N, WorkerSpec>>): Promise<Workerd<N>> {
  const names = Object.keys(specs) as N[];
  const ports = new Map<N, number>();
  for (const name of names) ports.set(name, await freePort());
  const moduleList = modules.map((module) => `(name = ${capnpText(module)}, esModule = embed ${capnpText(`${modulesDir}/${module}`)})`).join(", ");
  const workers = names.map((name, index) => {
    const spec = specs[name];
    const bindings = [
      ...(spec.config === undefined ? [] : [`(name = "DEERFLOW_CONFIG", text = ${capnpText(JSON.stringify(spec.config))})`]),
      ...Object.entries(spec.secrets ?? {}).map(([key, value]) => `(name = ${capnpText(key)}, text = ${capnpText(value)})`),
    ];
    return `const worker${index} :Workerd.Worker = (
  modules = [ ${moduleList} ],
  compatibilityDate = "2026-08-01",
  compatibilityFlags = ["nodejs_compat"],
  bindings = [ ${bindings.join(", ")} ],
  globalOutbound = "loopback",
);`;
  });
  const capnp = `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    ${names.map((_, index) => `(name = "w${index}", worker = .worker${index}),`).join("\n    ")}
    # A model endpoint on 127.0.0.1: workerd's default network service allows only public addresses.
    (name = "loopback", network = (allow = ["public", "local"])),
  ],
  sockets = [
    ${names.map((name, index) => `(name = "w${index}", address = "127.0.0.1:${ports.get(name)}", http = (), service = "w${index}"),`).join("\n    ")}
  ],
);
${workers.join("\n")}
`;
  await writeFile(join(dir, "config.capnp"), capnp);
  // The workerd binary itself, not node_modules/.bin/workerd: that is a node script which starts the
  // binary as its own child, so killing it left the binary running (about 235 MB each, one per test run).
  const child = spawn(WORKERD_BINARY, ["serve", join(dir, "config.capnp")], { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout!.on("data", (chunk: Buffer) => (out += chunk.toString()));
  child.stderr!.on("data", (chunk: Buffer) => (out += chunk.toString()));
  const exited = new Promise<void>((done) => child.once("exit", () => done()));
  const urls = Object.fromEntries(names.map((name) => [name, `http://127.0.0.1:${ports.get(name)}`])) as Record<N, string>;
  const workerd: Workerd<N> = {
    urls,
    output: () => out,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    },
  };
  const deadline = Date.now() + MINUTE;
  try {
    for (const url of Object.values<string>(urls)) {
      for (;;) {
        const response = await fetch(`${url}/api/ok`).catch((error: unknown) => error as Error);
        if (response instanceof Response) {
          await response.body?.cancel();
          break;
        }
        if (Date.now() > deadline || child.exitCode !== null) throw new Error(`workerd did not answer ${url}: ${String(response)}\n${out}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  } catch (error) {
    await workerd.kill();
    throw error;
  }
  return workerd;
}
