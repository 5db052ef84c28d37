// Issue 15, point 4: runs over three gateway processes (Node, Deno, Bun) on one PostgreSQL,
// behind the round-robin proxy, driven over HTTP and the official SDK. Streams and joins read from
// any worker; cancel, interrupt and rollback across workers; admission under reject and enqueue
// held by the database; no run executed twice or lost; delete refused under a running run.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCluster, stopCluster, type Cluster } from "./harness.ts";
import {
  api,
  collect,
  createRun,
  createThread,
  dataFrames,
  getRun,
  isTerminal,
  joinStream,
  pool,
  startRun,
  until,
  waitForRun,
  type RunRow,
} from "./drive.ts";
import { scriptedInput } from "./scripted-model.ts";
import type { SseFrame } from "../portable/gateway/runs-harness.ts";

let cluster: Cluster;

beforeAll(async () => {
  cluster = await startCluster();
});
afterAll(async () => {
  await stopCluster(cluster);
});

const WORKERS = [0, 1, 2] as const;
const comparable = (frames: readonly SseFrame[]) => frames.filter((f) => f.event !== "end").map((f) => ({ event: f.event, id: f.id, data: f.data }));

/** Until the counter has seen a call of `runId` (the run is executing its tool, so it is running). */
const counted = (runId: string, calls = 1) => until(() => cluster.counter.callsOf(runId).length >= calls, `run ${runId} to reach its tool ${calls}×`);

describe("a cluster of three workers (Node, Deno, Bun) over one PostgreSQL", () => {
  it("streams a run from the worker that started it, joins it live on the other two (from the start and after a Last-Event-ID: exactly the missed frames, then end), and reads it through every worker", async () => {
    const threadId = await createThread(cluster, 0);
    const response = await api(cluster, `/threads/${threadId}/runs/stream`, {
      method: "POST",
      worker: 0,
      body: JSON.stringify({ assistant_id: "lead_agent", input: scriptedInput({ steps: 4, delayMs: 400 }), stream_mode: ["values", "updates"] }),
    });
    const original: SseFrame[] = [];
    const reading = (async () => {
      for await (const frame of dataFrames(response)) original.push(frame);
    })();
    await until(() => original.filter((f) => f.id !== undefined).length >= 3, "three frames of the started run");
    const runId = (original.find((f) => f.event === "metadata")!.data as { run_id: string }).run_id;
    expect(isTerminal(await getRun(cluster, threadId, runId, 1))).toBe(false);
    const cut = original.filter((f) => f.id !== undefined).at(-1)!;
    const [fromStart, afterCut] = await Promise.all([
      joinStream(cluster, threadId, runId, 2).then((r) => collect(dataFrames(r))),
      joinStream(cluster, threadId, runId, 1, cut.id).then((r) => collect(dataFrames(r))),
    ]);
    await reading;

    expect(original.filter((f) => f.event === "error")).toEqual([]);
    expect(original.at(-1)?.event).toBe("end");
    expect(fromStart.filter((f) => f.event === "error")).toEqual([]);
    expect(fromStart.at(-1)?.event).toBe("end");
    expect(comparable(fromStart)).toEqual(comparable(original));
    const missed = original.slice(original.indexOf(cut) + 1);
    expect(afterCut.at(-1)?.event).toBe("end");
    expect(comparable(afterCut)).toEqual(comparable(missed));

    const states = [];
    for (const worker of WORKERS) {
      expect((await getRun(cluster, threadId, runId, worker)).status).toBe("success");
      const client = cluster.clientFor(worker);
      states.push(await client.threads.getState<{ messages: Array<{ type: string; content: unknown }> }>(threadId));
      const joined = (await client.runs.join(threadId, runId)) as { messages: Array<{ content: unknown }> };
      expect(joined.messages.at(-1)?.content).toBe("done after 4 steps");
      // A finished run joined later: just `end`.
      expect((await collect(dataFrames(await joinStream(cluster, threadId, runId, worker)))).map((f) => f.event).at(-1)).toBe("end");
    }
    expect(states[1]).toEqual(states[0]);
    expect(states[2]).toEqual(states[0]);
    expect(states[0]!.values.messages.at(-1)?.content).toBe("done after 4 steps");
  });

  it("cancels a run through another worker with interrupt and rollback and wait, each done within 1 s; rollback restores the pre-run checkpoint", async () => {
    const threadId = await createThread(cluster);
    const first = await startRun(cluster, threadId, { worker: 2, script: { steps: 1 } });
    await waitForRun(cluster, threadId, first.run_id, isTerminal);
    const before = await cluster.clientFor(0).threads.getState(threadId);

    const interrupted = await startRun(cluster, threadId, { worker: 0, script: { steps: 20, delayMs: 300 } });
    await counted(interrupted.run_id);
    let started = performance.now();
    const cancel = await api(cluster, `/threads/${threadId}/runs/${interrupted.run_id}/cancel?wait=true&action=interrupt`, { method: "POST", worker: 1 });
    const interruptMs = performance.now() - started;
    expect(cancel.status, await cancel.text()).toBe(204);
    expect(interruptMs).toBeLessThan(1000);
    expect((await getRun(cluster, threadId, interrupted.run_id, 2)).status).toBe("interrupted");
    const afterInterrupt = await cluster.clientFor(0).threads.getState(threadId);
    expect(afterInterrupt.checkpoint.checkpoint_id).not.toBe(before.checkpoint.checkpoint_id);

    const rolled = await startRun(cluster, threadId, { worker: 1, script: { steps: 20, delayMs: 300 } });
    await counted(rolled.run_id);
    started = performance.now();
    const rollback = await api(cluster, `/threads/${threadId}/runs/${rolled.run_id}/cancel?wait=true&action=rollback`, { method: "POST", worker: 2 });
    const rollbackMs = performance.now() - started;
    expect(rollback.status, await rollback.text()).toBe(204);
    expect(rollbackMs).toBeLessThan(1000);
    const row = await getRun(cluster, threadId, rolled.run_id, 0);
    expect(row.status).toBe("error");
    expect(row.error?.message).toBe("Rolled back by user");
    const after = await cluster.clientFor(0).threads.getState<Record<string, unknown>>(threadId);
    expect(after.values).toEqual(afterInterrupt.values);
    expect((after.metadata as { writes?: { rollback_restore?: { restored_checkpoint_id?: string } } }).writes?.rollback_restore?.restored_checkpoint_id).toBe(
      afterInterrupt.checkpoint.checkpoint_id,
    );
  });

  it("admits exactly one of 20 concurrent reject creates on one thread spread over the workers; the others are 409", async () => {
    const threadId = await createThread(cluster);
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => createRun(cluster, threadId, { worker: i % 3, strategy: "reject", script: { steps: 1, delayMs: 1000 } })),
    );
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.filter((s) => s === 409)).toHaveLength(19);
    const admitted = answers.find((a) => a.status === 200)!.row;
    expect((await waitForRun(cluster, threadId, admitted.run_id, isTerminal)).status).toBe("success");
    const runs = await cluster.client.runs.list(threadId, { limit: 50 });
    expect(runs.map((r) => r.run_id)).toEqual([admitted.run_id]);
    expect(cluster.counter.callsOf(admitted.run_id)).toHaveLength(1);
  });

  it("runs 10 enqueue creates alternating between workers one at a time, in admission order", async () => {
    const threadId = await createThread(cluster);
    const rows: RunRow[] = [];
    for (let i = 0; i < 10; i++) rows.push(await startRun(cluster, threadId, { worker: i % 3, strategy: "enqueue", script: { steps: 2, delayMs: 50 } }));
    for (const row of rows) expect((await waitForRun(cluster, threadId, row.run_id, isTerminal)).status).toBe("success");
    const spans = rows.map((row) => {
      const calls = cluster.counter.callsOf(row.run_id);
      expect(calls.map((c) => c.step)).toEqual([1, 2]);
      return { first: calls[0]!.at, last: calls[1]!.at, worker: calls[0]!.worker };
    });
    for (let i = 1; i < spans.length; i++) expect(spans[i]!.first, `run ${i} started after run ${i - 1} ended`).toBeGreaterThan(spans[i - 1]!.last);
    // Admitted through all three workers, so the order held across processes.
    expect(new Set(spans.map((s) => s.worker)).size).toBe(3);
  });

  it("interrupt through another worker: the old run has ended before the new one starts", async () => {
    const threadId = await createThread(cluster);
    const old = await startRun(cluster, threadId, { worker: 1, script: { steps: 20, delayMs: 200 } });
    await counted(old.run_id, 2);
    const next = await startRun(cluster, threadId, { worker: 2, strategy: "interrupt", script: { steps: 1 } });
    expect((await waitForRun(cluster, threadId, next.run_id, isTerminal)).status).toBe("success");
    expect((await getRun(cluster, threadId, old.run_id, 0)).status).toBe("interrupted");
    const oldCalls = cluster.counter.callsOf(old.run_id);
    const newCalls = cluster.counter.callsOf(next.run_id);
    expect(newCalls).toHaveLength(1);
    expect(Math.max(...oldCalls.map((c) => c.at))).toBeLessThan(newCalls[0]!.at);
    // The old run never resumed afterwards either.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(cluster.counter.callsOf(old.run_id)).toHaveLength(oldCalls.length);
  });

  it("executes each of 300 runs exactly once: every run's counter is 1, none lost, none extra", async () => {
    const threads = await pool(Array.from({ length: 60 }, (_, i) => i), 12, () => createThread(cluster));
    const before = new Set(cluster.counter.counts().keys());
    // Five enqueued runs per thread, created concurrently through the rotation.
    const rows = await pool(Array.from({ length: 300 }, (_, i) => i), 24, (i) => startRun(cluster, threads[i % 60]!, { strategy: "enqueue", script: { steps: 1 } }));
    await pool(rows, 12, (row) => waitForRun(cluster, row.thread_id, row.run_id, isTerminal, 240_000));
    const finals = await pool(rows, 12, (row) => getRun(cluster, row.thread_id, row.run_id));
    expect(finals.filter((r) => r.status !== "success").map((r) => `${r.run_id}: ${r.status}`)).toEqual([]);
    const counts = cluster.counter.counts();
    const fresh = [...counts.keys()].filter((id) => !before.has(id));
    expect(fresh.sort()).toEqual(rows.map((r) => r.run_id).sort());
    expect(rows.filter((r) => counts.get(r.run_id) !== 1).map((r) => `${r.run_id}: ${counts.get(r.run_id) ?? 0}`)).toEqual([]);
    // Every worker executed some.
    expect(new Set(rows.map((r) => cluster.counter.callsOf(r.run_id)[0]!.worker)).size).toBe(3);
  }, 300_000);

  it("refuses a thread delete through another worker while a run holds the thread (409), and leaves no checkpoint behind once deleted", async () => {
    const threadId = await createThread(cluster);
    const run = await startRun(cluster, threadId, { worker: 0, script: { steps: 6, delayMs: 300 } });
    await counted(run.run_id);
    const refused = await api(cluster, `/threads/${threadId}`, { method: "DELETE", worker: 1 });
    expect(refused.status, await refused.text()).toBe(409);
    expect((await waitForRun(cluster, threadId, run.run_id, isTerminal)).status).toBe("success");
    expect(cluster.counter.callsOf(run.run_id)).toHaveLength(6);
    expect(await checkpointRows(threadId)).toBeGreaterThan(0);
    const deleted = await api(cluster, `/threads/${threadId}`, { method: "DELETE", worker: 2 });
    expect(deleted.status, await deleted.text()).toBeLessThan(300);
    expect(await checkpointRows(threadId)).toBe(0);
    for (const worker of WORKERS) expect((await api(cluster, `/threads/${threadId}`, { worker })).status).toBe(404);
  });
});

/** Rows naming the thread in every checkpoint table of the database, whatever schema holds them. */
async function checkpointRows(threadId: string): Promise<number> {
  const tables = await cluster.pool.query<{ table_schema: string; table_name: string }>(
    `select table_schema, table_name from information_schema.columns
      where column_name = 'thread_id' and table_name like '%checkpoint%' and table_schema not in ('pg_catalog', 'information_schema')`,
  );
  expect(tables.rows.length, "the database has checkpoint tables").toBeGreaterThan(0);
  let total = 0;
  for (const { table_schema, table_name } of tables.rows) {
    const result = await cluster.pool.query<{ n: string }>(`select count(*) as n from "${table_schema}"."${table_name}" where thread_id = $1`, [threadId]);
    total += Number(result.rows[0]!.n);
  }
  return total;
}
