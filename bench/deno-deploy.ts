/**
 * deno-deploy: deploy/deno-deploy.ts under `deno serve` with exactly Deno Deploy's permissions
 * (--allow-net --allow-env --allow-read --unstable-kv), configured by environment variables only,
 * on Deno's default KV database in a temp DENO_DIR, the model being the replay server of recorded
 * OpenAI traffic (test/portable/openai-replay.ts, the fixtures test/portable/gateway/deno-deploy.test.ts
 * uses). Per launch: milliseconds from spawn to "Listening on" and to the first 200 from /api/ok;
 * then one streamed run with tools through the official SDK (write_file, bash, a streamed answer:
 * three model calls) to its end, and to its first streamed token; then SIGKILL, a restart and the
 * time to read that thread's state back. The deno binary is the project's (node_modules/.bin/deno)
 * whatever runtime runs this file. Knobs: BENCH_SAMPLES (default 5 launches, after one warm-up
 * launch that fills Deno's caches). Run: `npx tsx bench/deno-deploy.ts`, or
 * `BENCH_NAMES=deno-deploy BENCH_RUNTIMES=node npm run bench`.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@langchain/langgraph-sdk";
import { DEPLOY_ENV } from "../src/cli/deploy-env.ts";
import { startDenoDeploy, type CliServer } from "../test/portable/gateway/cli-server.ts";
import { loadFixtures, startReplayServer } from "../test/portable/openai-replay.ts";
import { emit, envNumber, loadAverage, median, progressLog, quantile, round3, runBench, runtimeInfo } from "./harness.ts";

const BENCH = "deno-deploy";
const log = progressLog(BENCH);
const AGENT_FIXTURES = fileURLToPath(new URL("../test/fixtures/openai/agent/", import.meta.url));
const GATEWAY_KEY = "bench-deploy-key-0123456789abcdef";
const PROMPT = "Write a deploy note to the outputs folder, then count its bytes.";

interface Sample {
  listening: number;
  firstOk: number;
  firstToken: number;
  run: number;
  restartListening: number;
  restartRead: number;
}

async function firstOk(server: CliServer, started: number): Promise<number> {
  for (;;) {
    const response = await fetch(`${server.url}/api/ok`).catch(() => undefined);
    await response?.body?.cancel();
    if (response?.status === 200) return performance.now() - started;
    if (performance.now() - started > 60_000) throw new Error(`/api/ok never answered 200:\n${server.output()}`);
  }
}

runBench(BENCH, async () => {
  const { runtime, version } = runtimeInfo();
  const samples = Math.round(envNumber("BENCH_SAMPLES", 5));
  const replay = await startReplayServer([...loadFixtures(AGENT_FIXTURES), ...loadFixtures()]);
  const denoDir = mkdtempSync(join(tmpdir(), "deerflow-bench-deploy-deno-dir-"));
  const cwd = mkdtempSync(join(tmpdir(), "deerflow-bench-deploy-cwd-"));
  const env = {
    DENO_DIR: denoDir,
    [DEPLOY_ENV.apiKey]: GATEWAY_KEY,
    [DEPLOY_ENV.model]: "gpt-4o-mini",
    [DEPLOY_ENV.modelBaseUrl]: replay.baseUrl,
    [DEPLOY_ENV.modelApiKey]: "sk-test-123",
  };

  async function launch(): Promise<Sample> {
    let started = performance.now();
    let server = await startDenoDeploy(env, { cwd });
    try {
      const listening = performance.now() - started;
      const ok = await firstOk(server, started);
      const client = new Client({ apiUrl: `${server.url}/api`, apiKey: GATEWAY_KEY });
      const thread = (await client.threads.create()).thread_id;
      const runStarted = performance.now();
      let firstToken = Number.NaN;
      let last: { messages: unknown[] } | undefined;
      for await (const part of client.runs.stream(thread, "lead_agent", {
        input: { messages: [{ type: "human", content: PROMPT }] },
        streamMode: ["values", "messages-tuple"],
      })) {
        if (part.event === "error") throw new Error(`the run failed: ${JSON.stringify(part.data)}`);
        if (part.event === "messages" && Number.isNaN(firstToken)) firstToken = performance.now() - runStarted;
        if (part.event === "values") last = part.data as { messages: unknown[] };
      }
      const run = performance.now() - runStarted;
      if ((last?.messages.length ?? 0) < 6) throw new Error(`the run ended with ${last?.messages.length} messages:\n${server.output()}`);
      await server.kill();

      started = performance.now();
      server = await startDenoDeploy(env, { cwd });
      const restartListening = performance.now() - started;
      const restarted = new Client({ apiUrl: `${server.url}/api`, apiKey: GATEWAY_KEY });
      const state = await restarted.threads.getState<{ messages: unknown[] }>(thread);
      const restartRead = performance.now() - started;
      if (state.values.messages.length !== last!.messages.length) throw new Error("the thread did not survive the restart");
      return { listening, firstOk: ok, firstToken, run, restartListening, restartRead };
    } finally {
      await server.kill();
    }
  }

  try {
    log("warm-up launch (fills Deno's module and npm caches)");
    await launch();
    const all: Sample[] = [];
    for (let n = 0; n < samples; n++) {
      const sample = await launch();
      all.push(sample);
      log(`#${n + 1}: first /api/ok after ${Math.round(sample.firstOk)} ms, streamed run ${Math.round(sample.run)} ms, read after restart ${Math.round(sample.restartRead)} ms`);
    }
    const of = (key: keyof Sample) => all.map((s) => s[key]);
    emit({
      bench: BENCH,
      summary: true,
      driver: runtime,
      driver_version: version,
      flags: "--allow-net --allow-env --allow-read --unstable-kv",
      samples,
      listening_ms_median: round3(median(of("listening"))),
      first_ok_ms_median: round3(median(of("firstOk"))),
      first_ok_ms_p90: round3(quantile(of("firstOk"), 0.9)),
      streamed_run_ms_median: round3(median(of("run"))),
      streamed_run_ms_p90: round3(quantile(of("run"), 0.9)),
      first_token_ms_median: round3(median(of("firstToken"))),
      restart_listening_ms_median: round3(median(of("restartListening"))),
      restart_read_state_ms_median: round3(median(of("restartRead"))),
      model_calls_per_run: 3,
      load_avg: loadAverage(),
    });
  } finally {
    await replay.close();
    rmSync(denoDir, { recursive: true, force: true });
    rmSync(cwd, { recursive: true, force: true });
  }
});
