/**
 * worker-bundle: how big what a user deploys is. The Cloudflare Workers bundle (scripts/
 * build-worker.mjs: esbuild, split, minified by esbuild and then oxc): raw and gzip bytes (zlib's default level) of the
 * entry module an isolate evaluates at start, of each chunk it imports when first needed (the
 * virtual sandbox's just-bash) and of all of them (what is uploaded); goal under 800 KB gzip;
 * the packages that take the most (esbuild's metafile: bytes as esbuild wrote them, before oxc's
 * pass, and their share of esbuild's total); the `bun build --compile` binary's bytes.
 * And on workerd (nodejs_compat), per cold start of BENCH_SAMPLES (default 3): ms from launch to
 * the first /api/ok (the first request builds the gateway), then of a first streamed demo run
 * (write_file and bash: the first sandbox loads the just-bash chunk) and of a second one.
 * One JSON line per module, per package of the top BENCH_TOP (default 12), the binary, workerd, a summary.
 * The same numbers under every runtime (the builds run in a node child process and bun).
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { startWorkerd } from "../test/portable/gateway/workerd-harness.ts";
import { emit, envNumber, loadAverage, median, progressLog, round3, runBench, runtimeInfo } from "./harness.ts";

const BENCH = "worker-bundle";
const log = progressLog(BENCH);
const ROOT = fileURLToPath(new URL("..", import.meta.url));
/** 800 KB, in the kilobytes of 1000 bytes the platform's limits are written in. */
const GOAL_GZIP_BYTES = 800_000;

interface Metafile {
  outputs: Record<string, { inputs: Record<string, { bytesInOutput: number }> }>;
}

/** "node_modules/@scope/name/dist/x.js" → "@scope/name"; a file of this repository → its top folder. */
function owner(input: string): string {
  const match = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(input);
  return match ? match[1]! : input.split("/")[0]!;
}

/** One streamed run of the built-in demo model on a new thread, read to its end: milliseconds. */
async function demoRun(url: string): Promise<number> {
  const headers = { "content-type": "application/json", "x-api-key": "bench-key-5c2e9a1f7b3d4e6a8c0b" };
  const started = performance.now();
  const thread = (await (await fetch(`${url}/api/threads`, { method: "POST", headers, body: "{}" })).json()) as { thread_id: string };
  const response = await fetch(`${url}/api/threads/${thread.thread_id}/runs/stream`, {
    method: "POST",
    headers,
    body: JSON.stringify({ input: { messages: [{ type: "human", content: "Write a note about the edge." }] }, stream_mode: ["values"] }),
  });
  const text = await response.text();
  if (response.status !== 200 || !text.includes("event: end") || !text.includes("notes.md")) throw new Error(`the demo run failed (${response.status}): ${text.slice(0, 500)}`);
  return performance.now() - started;
}

runBench(BENCH, async () => {
  const { runtime, version } = runtimeInfo();
  const top = Math.round(envNumber("BENCH_TOP", 12));
  const dir = mkdtempSync(join(tmpdir(), "deerflow-bench-bundle-"));
  try {
    log("building the Workers bundle (node scripts/build-worker.mjs)");
    const outdir = join(dir, "worker");
    const metaPath = join(dir, "meta.json");
    const modules = execFileSync("node", [join(ROOT, "scripts/build-worker.mjs"), "--outdir", outdir, "--metafile", metaPath], { cwd: ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] })
      .trim()
      .split("\n");
    const sizes = modules.map((module) => {
      const code = readFileSync(join(outdir, module));
      return { module, raw: code.length, gzip: gzipSync(code).length };
    });
    for (const [index, size] of sizes.entries()) {
      emit({ bench: BENCH, runtime, version, artifact: "workers-bundle", module: size.module, role: index === 0 ? "entry" : "chunk", raw_bytes: size.raw, gzip_bytes: size.gzip });
    }
    const entry = sizes[0]!;
    const rawBytes = sizes.reduce((sum, size) => sum + size.raw, 0);
    const gzipBytes = sizes.reduce((sum, size) => sum + size.gzip, 0);

    const meta = JSON.parse(readFileSync(metaPath, "utf8")) as Metafile;
    const byOwner = new Map<string, number>();
    for (const output of Object.values(meta.outputs)) {
      for (const [input, { bytesInOutput }] of Object.entries(output.inputs)) byOwner.set(owner(input), (byOwner.get(owner(input)) ?? 0) + bytesInOutput);
    }
    const esbuildBytes = [...byOwner.values()].reduce((sum, bytes) => sum + bytes, 0);
    for (const [name, bytes] of [...byOwner].sort((a, b) => b[1] - a[1]).slice(0, top)) {
      emit({ bench: BENCH, runtime, artifact: "workers-bundle", package: name, raw_bytes: bytes, share: Math.round((bytes / esbuildBytes) * 1000) / 1000 });
    }

    const samples = Math.round(envNumber("BENCH_SAMPLES", 3));
    const timings = { ok: [] as number[], firstRun: [] as number[], secondRun: [] as number[] };
    for (let sample = 0; sample < samples; sample++) {
      const started = performance.now();
      const workerd = await startWorkerd(dir, "worker", modules, {
        demo: { config: { gateway: { auth: { mode: "api_key", api_keys: [{ key_env: "DEERFLOW_API_KEY", user_id: "bench" }] } } }, secrets: { DEERFLOW_API_KEY: "bench-key-5c2e9a1f7b3d4e6a8c0b" } },
      });
      try {
        timings.ok.push(performance.now() - started);
        timings.firstRun.push(await demoRun(workerd.urls.demo));
        timings.secondRun.push(await demoRun(workerd.urls.demo));
        log(`workerd #${sample + 1}: first /api/ok after ${Math.round(timings.ok.at(-1)!)} ms, runs ${Math.round(timings.firstRun.at(-1)!)} and ${Math.round(timings.secondRun.at(-1)!)} ms`);
      } finally {
        await workerd.kill();
      }
    }
    const workerdLine = {
      first_ok_ms_median: round3(median(timings.ok)),
      first_run_ms_median: round3(median(timings.firstRun)),
      second_run_ms_median: round3(median(timings.secondRun)),
    };
    emit({ bench: BENCH, runtime, version, artifact: "workerd", samples, ...workerdLine, load_avg: loadAverage() });

    log("compiling the binary (node scripts/build-binary.mjs)");
    const binary = join(dir, "deerflow-edge");
    execFileSync("node", [join(ROOT, "scripts/build-binary.mjs"), "--outfile", binary], { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"] });
    const binaryBytes = statSync(binary).size;
    emit({ bench: BENCH, runtime, version, artifact: "bun-binary", raw_bytes: binaryBytes });

    emit({
      bench: BENCH, summary: true, runtime, version,
      workers_entry_raw_bytes: entry.raw, workers_entry_gzip_bytes: entry.gzip, workers_raw_bytes: rawBytes, workers_gzip_bytes: gzipBytes,
      goal_gzip_bytes: GOAL_GZIP_BYTES, entry_under_goal: entry.gzip < GOAL_GZIP_BYTES, all_modules_under_goal: gzipBytes < GOAL_GZIP_BYTES,
      bun_binary_bytes: binaryBytes,
      workerd_first_ok_ms: workerdLine.first_ok_ms_median, workerd_first_run_ms: workerdLine.first_run_ms_median,
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
