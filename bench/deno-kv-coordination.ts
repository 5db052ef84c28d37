/**
 * deno-kv-coordination: what Deno KV run coordination costs in one process over a local KV file
 * and ":memory:" (two coordinator and bus instances on one handle stand in for two isolates;
 * Deploy's database is remote, so its round trips are longer: this is the floor, not Deploy).
 *
 * Run: npx deno run --allow-read --allow-write --allow-env --unstable-kv bench/deno-kv-coordination.ts
 * Env knob: BENCH_SAMPLES (default 200).
 *
 * Output: one JSON line per backend on stdout:
 * { bench, backend, samples, lifecycle_ms_p50, lifecycle_ms_p99, frame_delay_ms_p50, frame_delay_ms_p99,
 *   signal_delay_ms_p50, signal_delay_ms_p99 }
 * lifecycle: admit, claim, update to success and release of one run (four checked commits plus
 * their reads); frame delay: from a publish on one bus to a subscriber on the other bus seeing the
 * frame (the watch on the log head); signal delay: from signal() on one bus to a listener of the other.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDenoKv, type DenoKvWatchable } from "../adapters/deno/kv-key-value.ts";
import { DenoKvRunCoordinator } from "../adapters/deno/kv-run-coordinator.ts";
import { DenoKvStreamBus } from "../adapters/deno/kv-stream-bus.ts";
import type { RunRecord } from "../src/runtime/runs/types.ts";

const samples = Number(process.env.BENCH_SAMPLES ?? 200);
const pct = (values: number[], p: number) => Number([...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * p))]!.toFixed(2));

async function measure(backend: string, kv: DenoKvWatchable): Promise<void> {
  const a = new DenoKvRunCoordinator({ kv });
  const b = new DenoKvRunCoordinator({ kv });
  const lifecycle: number[] = [];
  for (let i = 0; i < samples; i++) {
    const at = new Date().toISOString();
    const row: RunRecord = {
      run_id: `run-${i}`,
      thread_id: `thread-${i % 8}`,
      assistant_id: "lead_agent",
      status: "pending",
      metadata: {},
      multitask_strategy: "enqueue",
      created_at: at,
      updated_at: at,
      owner_id: "bench",
      error: null,
      kwargs: { input: { messages: [{ role: "user", content: "hello" }] } },
    };
    const start = performance.now();
    await a.admit(row, "enqueue", "wa");
    if ((await b.claim(row.thread_id, row.run_id, "wa")) !== "claimed") throw new Error("the bench run was not claimed");
    await a.update({ ...row, status: "success" }, "wa");
    await b.release(row.thread_id, row.run_id, "wa");
    lifecycle.push(performance.now() - start);
  }

  const publisher = new DenoKvStreamBus({ kv });
  const reader = new DenoKvStreamBus({ kv });
  await publisher.open("bench-run");
  const sentAt = new Map<number, number>();
  const frameDelays: number[] = [];
  const reading = (async () => {
    for await (const frame of reader.subscribe("bench-run")) {
      if (frame.event === "end") return;
      frameDelays.push(performance.now() - sentAt.get(frame.data as number)!);
    }
  })();
  for (let i = 0; i < samples; i++) {
    sentAt.set(i, performance.now());
    await publisher.publish("bench-run", "custom", i);
    // One frame in flight at a time, so each delay is one watch wake-up, not a batch's.
    while (frameDelays.length <= i) await new Promise((resolve) => setTimeout(resolve, 1));
  }
  await publisher.end("bench-run");
  await reading;

  const signalDelays: number[] = [];
  let received: (() => void) | undefined;
  reader.listen(() => received?.());
  // The listener's watch starts on its first listen: give it a round before timing.
  await new Promise((resolve) => setTimeout(resolve, 50));
  for (let i = 0; i < Math.min(samples, 100); i++) {
    const got = new Promise<void>((resolve) => (received = resolve));
    const start = performance.now();
    await publisher.signal({ kind: "wake", thread_id: `t${i}` });
    await got;
    signalDelays.push(performance.now() - start);
  }
  await publisher.close();
  await reader.close();
  console.log(
    JSON.stringify({
      bench: "deno-kv-coordination",
      backend,
      samples,
      lifecycle_ms_p50: pct(lifecycle, 0.5),
      lifecycle_ms_p99: pct(lifecycle, 0.99),
      frame_delay_ms_p50: pct(frameDelays, 0.5),
      frame_delay_ms_p99: pct(frameDelays, 0.99),
      signal_delay_ms_p50: pct(signalDelays, 0.5),
      signal_delay_ms_p99: pct(signalDelays, 0.99),
    }),
  );
}

const dir = await mkdtemp(join(tmpdir(), "deerflow-bench-kv-coordination-"));
try {
  const file = (await openDenoKv(join(dir, "bench.kv"))) as DenoKvWatchable;
  await measure("file", file);
  file.close();
  const memory = (await openDenoKv(":memory:")) as DenoKvWatchable;
  await measure(":memory:", memory);
  memory.close();
} finally {
  await rm(dir, { recursive: true, force: true });
}
