/**
 * cli-start: time from launching `deerflow-edge serve --port 0` to its first `/api/ok` answer,
 * from source (Node: tsx transpiling at start, what `npm start` runs; Deno and Bun: the .ts
 * entries) against the built package (dist/, what `npm pack` ships: `node bin/deerflow-edge.mjs`,
 * which runs the one-file bundle dist/bin/deerflow-edge.mjs; `deno run dist/adapters/deno/cli.js`,
 * `bun dist/adapters/bun/cli.js`), for the runtime this runs under. On Node also "compiled": tsc's
 * dist/adapters/node/cli.js without the bundle; on Bun also "binary": the `bun build --compile`
 * executable (scripts/build-binary.mjs, dist/deerflow-edge). Builds dist/ first (`npm run build`) so the numbers are of the current source. Goal:
 * under 1 s on Node from the build. Knobs: BENCH_SAMPLES (default 7 launches per variant,
 * interleaved). Memory storage in a temp folder, the demo model; one JSON line per variant.
 */
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { emit, envNumber, loadAverage, median, progressLog, quantile, round3, runBench, runtimeInfo, type Runtime } from "./harness.ts";

const BENCH = "cli-start";
const log = progressLog(BENCH);
const ROOT = fileURLToPath(new URL("..", import.meta.url));
const g = globalThis as { Deno?: { execPath(): string }; process?: { execPath: string } };
const BINARY = join(ROOT, "dist/deerflow-edge");

interface Variant {
  readonly name: "source" | "built" | "compiled" | "binary";
  readonly command: string;
  readonly args: readonly string[];
}

function variants(runtime: Runtime): Variant[] {
  const self = g.Deno ? g.Deno.execPath() : g.process!.execPath;
  switch (runtime) {
    case "node":
      return [
        { name: "source", command: self, args: ["--import", join(ROOT, "node_modules/tsx/dist/loader.mjs"), join(ROOT, "adapters/node/cli.ts")] },
        // What the installed bin runs: dist/bin/deerflow-edge.mjs, the one-file bundle (in this
        // checkout the bin itself runs the sources); "compiled" is tsc's output unbundled.
        { name: "built", command: self, args: [join(ROOT, "dist/bin/deerflow-edge.mjs")] },
        { name: "compiled", command: self, args: [join(ROOT, "dist/adapters/node/cli.js")] },
      ];
    case "deno": {
      const flags = ["run", "--config", join(ROOT, "deno.json"), "-A", "--unstable-no-legacy-abort"];
      return [
        { name: "source", command: self, args: [...flags, join(ROOT, "adapters/deno/cli.ts")] },
        { name: "built", command: self, args: [...flags, join(ROOT, "dist/adapters/deno/cli.js")] },
      ];
    }
    case "bun":
      return [
        { name: "source", command: self, args: [join(ROOT, "adapters/bun/cli.ts")] },
        { name: "built", command: self, args: [join(ROOT, "dist/adapters/bun/cli.js")] },
        // `bun build --compile` (npm run build:binary): the Bun CLI as one executable file.
        { name: "binary", command: BINARY, args: [] },
      ];
  }
}

/** One launch: milliseconds to the listening line and to the first 200 from /api/ok. */
async function launch(variant: Variant, config: string, cwd: string): Promise<{ listening: number; ok: number }> {
  const started = performance.now();
  const child = spawn(variant.command, [...variant.args, "serve", "--config", config, "--host", "127.0.0.1", "--port", "0"], {
    cwd,
    env: { ...(globalThis as { process?: { env: Record<string, string> } }).process?.env, NO_COLOR: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (chunk) => (stderr += String(chunk)));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${variant.name}: no URL within 60 s. ${stderr}`)), 60_000);
      void exited.then(() => reject(new Error(`${variant.name}: exited before listening. ${stderr}`)));
      createInterface({ input: child.stdout! }).on("line", (line) => {
        const found = /(http:\/\/127\.0\.0\.1:\d+)/.exec(line)?.[1];
        if (found !== undefined && line.startsWith("deerflow-edge gateway")) {
          clearTimeout(timer);
          resolve(found);
        }
      });
    });
    const listening = performance.now() - started;
    for (;;) {
      const response = await fetch(`${url}/api/ok`).catch(() => undefined);
      if (response?.status === 200) {
        await response.body?.cancel();
        return { listening, ok: performance.now() - started };
      }
      await response?.body?.cancel();
      if (performance.now() - started > 60_000) throw new Error(`${variant.name}: /api/ok never answered 200`);
    }
  } finally {
    child.kill("SIGTERM");
    const killer = setTimeout(() => child.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(killer);
  }
}

runBench(BENCH, async () => {
  const { runtime, version } = runtimeInfo();
  const samples = Math.round(envNumber("BENCH_SAMPLES", 7));
  log("building dist/ (npm run build)");
  execFileSync("npm", ["run", "--silent", "build"], { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"] });
  if (runtime === "bun") execFileSync("node", [join(ROOT, "scripts/build-binary.mjs"), "--outfile", BINARY], { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"] });
  const dir = mkdtempSync(join(tmpdir(), "deerflow-bench-cli-start-"));
  const config = join(dir, "config.yaml");
  writeFileSync(config, "storage:\n  driver: memory\n");
  try {
    const all = variants(runtime);
    // One warm launch each: the OS file cache and tsx's transform cache, as a user's second start.
    for (const variant of all) await launch(variant, config, dir);
    const results = new Map<string, { listening: number[]; ok: number[] }>(all.map((v) => [v.name, { listening: [], ok: [] }]));
    for (let sample = 0; sample < samples; sample++) {
      for (const variant of sample % 2 === 0 ? all : [...all].reverse()) {
        const time = await launch(variant, config, dir);
        results.get(variant.name)!.listening.push(time.listening);
        results.get(variant.name)!.ok.push(time.ok);
        log(`${runtime} ${variant.name} #${sample + 1}: first /api/ok after ${Math.round(time.ok)} ms`);
      }
    }
    const medians: Record<string, number> = {};
    for (const [name, times] of results) {
      medians[name] = round3(median(times.ok));
      emit({
        bench: BENCH, runtime, version, variant: name, samples,
        first_ok_ms_median: round3(median(times.ok)), first_ok_ms_p90: round3(quantile(times.ok, 0.9)),
        first_ok_ms_min: round3(Math.min(...times.ok)), listening_ms_median: round3(median(times.listening)),
        load_avg: loadAverage(),
      });
    }
    emit({ bench: BENCH, summary: true, runtime, version, source_ms: medians.source, built_ms: medians.built, ...(medians.compiled === undefined ? {} : { compiled_ms: medians.compiled }), ...(medians.binary === undefined ? {} : { binary_ms: medians.binary }), goal_ms: 1000, built_under_goal: medians.built! < 1000 });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
