/**
 * Journals across kill -9: BENCH_KILLS times (default 10), the real CLI server of the runtime this
 * runs under starts a run whose model never answers, is SIGKILLed mid-run, and is started again on
 * the same storage; then every killed run's journal is read. Reports how many show their start
 * (pending, running) and their interruption by the restart. Goal: all of them.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { cliWorkspace } from "../test/portable/gateway/cli-server.ts";
import { emit, envNumber, progressLog, runBench, runtimeInfo } from "./harness.ts";

const BENCH = "crash-journal";
const log = progressLog(BENCH);

runBench(BENCH, async () => {
  const { runtime, version } = runtimeInfo();
  const kills = envNumber("BENCH_KILLS", 10);
  let modelRequests = 0;
  const model = createServer((request) => {
    modelRequests++;
    request.resume();
  });
  await new Promise<void>((resolve) => model.listen(0, "127.0.0.1", resolve));
  const workspace = await cliWorkspace(
    {
      models: [{ name: "silent", use: "openai-compatible", model: "silent-1", base_url: `http://127.0.0.1:${(model.address() as AddressInfo).port}/v1`, api_key_env: "SILENT_MODEL_KEY" }],
      default_model: "silent",
    },
    { SILENT_MODEL_KEY: "bench-key" },
  );
  const killed: Array<{ threadId: string; runId: string }> = [];
  const startMs: number[] = [];
  try {
    let server = await workspace.start();
    for (let i = 0; i < kills; i++) {
      const thread = (await (await fetch(`${server.url}/api/threads`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).json()) as { thread_id: string };
      const before = modelRequests;
      const run = (await (
        await fetch(`${server.url}/api/threads/${thread.thread_id}/runs`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ assistant_id: "lead_agent", input: { messages: [{ type: "human", content: `Run ${i}` }] } }),
        })
      ).json()) as { run_id: string };
      const deadline = Date.now() + 30_000;
      while (modelRequests === before) {
        if (Date.now() > deadline) throw new Error(`run ${i} never called the model`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      killed.push({ threadId: thread.thread_id, runId: run.run_id });
      await server.kill();
      const started = performance.now();
      server = await workspace.start();
      startMs.push(performance.now() - started);
      log(`kill ${i + 1}/${kills} done`);
    }
    let complete = 0;
    for (const { threadId, runId } of killed) {
      const journal = (await (await fetch(`${server.url}/api/threads/${threadId}/runs/${runId}/events`)).json()) as Array<{
        kind: string;
        data: { status?: string; reason?: string };
      }>;
      const statuses = journal.filter((e) => e.kind === "status").map((e) => e.data.status);
      const last = journal.filter((e) => e.kind === "status").at(-1);
      const ok = statuses.join(",") === "pending,running,interrupted" && /restart/i.test(last?.data.reason ?? "");
      if (ok) complete++;
      else log(`run ${runId}: statuses ${statuses.join(",") || "(none)"}`);
    }
    await server.kill();
    emit({
      bench: BENCH,
      summary: true,
      runtime,
      runtime_version: version,
      kills,
      runs_with_start_and_interruption: complete,
      restart_ms_median: Math.round([...startMs].sort((a, b) => a - b)[startMs.length >> 1] ?? 0),
      goal: kills,
      within_goal: complete === kills,
    });
    if (complete !== kills) throw new Error(`${kills - complete} of ${kills} killed runs lack their start or their interruption in the journal.`);
  } finally {
    await workspace.dispose();
    model.closeAllConnections();
    model.close();
  }
});
