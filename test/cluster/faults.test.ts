// Issue 15, point 4: workers that start, die, stop and leave while runs are live. A fourth worker
// starting leaves every live run alone; SIGKILL of the owner: the run is `interrupted` within lease
// + grace (plus one sweep tick), remote streams end, the thread takes a new run; SIGSTOP past the
// lease then SIGCONT: the late writes are refused; SIGTERM drains the worker's runs while the
// others keep serving.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCluster, stopCluster, type Cluster } from "./harness.ts";
import { api, collect, createRun, createThread, dataFrames, getRun, isTerminal, joinStream, startRun, until, waitForRun } from "./drive.ts";
import type { SseFrame } from "../portable/gateway/runs-harness.ts";

const LEASE_MS = 3000;
const GRACE_MS = 1000;
// Beyond lease + grace: this test's 50 ms polling, the kill itself and a loaded machine's delays.
const SLACK_MS = 600;

let cluster: Cluster;

beforeAll(async () => {
  cluster = await startCluster({ leaseMs: LEASE_MS, leaseGraceMs: GRACE_MS });
});
afterAll(async () => {
  await stopCluster(cluster);
});

const counted = (runId: string, calls = 1) => until(() => cluster.counter.callsOf(runId).length >= calls, `run ${runId} to reach its tool ${calls}×`);

describe("workers coming and going under live runs", () => {
  it("a fourth worker starting leaves every live run of the other three alone", async () => {
    // About 15 s of run (longer than a worker's start on a loaded machine, plus lease and grace),
    // in few enough steps to stay under the agent's recursion limit.
    const STEPS = 25;
    const runs = await Promise.all(
      [0, 1, 2].map(async (worker) => {
        const threadId = await createThread(cluster, worker);
        return startRun(cluster, threadId, { worker, script: { steps: STEPS, delayMs: 600 } });
      }),
    );
    await Promise.all(runs.map((run) => counted(run.run_id)));
    const fourth = await cluster.addWorker("node");
    expect(fourth.index).toBe(3);
    // Live while the fourth started, or this proves nothing (a machine too slow for these runs).
    for (const run of runs) expect((await getRun(cluster, run.thread_id, run.run_id, 3)).status, "still running once the fourth worker listens").toBe("running");
    // Past lease + grace after the start: a startup that swept live runs would have shown by now.
    await new Promise((resolve) => setTimeout(resolve, LEASE_MS + GRACE_MS));
    for (const run of runs) expect((await getRun(cluster, run.thread_id, run.run_id, 3)).status).toBe("running");
    for (const run of runs) {
      const row = await waitForRun(cluster, run.thread_id, run.run_id, isTerminal);
      expect(row.status, JSON.stringify(row.error)).toBe("success");
    }
    for (const run of runs) expect(cluster.counter.callsOf(run.run_id).map((c) => c.step)).toEqual(Array.from({ length: STEPS }, (_, i) => i + 1));
    const threadId = await createThread(cluster, 3);
    const onFourth = await startRun(cluster, threadId, { worker: 3, script: { steps: 1 } });
    expect((await waitForRun(cluster, threadId, onFourth.run_id, isTerminal)).status).toBe("success");
    await cluster.terminate(3);
  }, 180_000);

  it("SIGKILL of the owning worker mid-run: interrupted within lease + grace, the other workers' streams of it end, the thread takes a new run", async () => {
    const threadId = await createThread(cluster);
    const run = await startRun(cluster, threadId, { worker: 0, script: { steps: 40, delayMs: 200 } });
    await counted(run.run_id);
    const remote = [1, 2].map((worker) => {
      const frames: SseFrame[] = [];
      const done = joinStream(cluster, threadId, run.run_id, worker).then(async (response) => {
        for await (const frame of dataFrames(response)) frames.push(frame);
        return performance.now();
      });
      return { frames, done };
    });
    await until(() => remote.every((r) => r.frames.length > 0), "both remote streams to deliver a frame");
    const killedAt = performance.now();
    await cluster.kill(0);
    // Back for the tests after this one, whatever this one finds.
    try {
      const swept = await waitForRun(cluster, threadId, run.run_id, isTerminal, 30_000);
      const sweptMs = performance.now() - killedAt;
      expect(swept.status).toBe("interrupted");
      expect(sweptMs).toBeLessThan(LEASE_MS + GRACE_MS + SLACK_MS);
      for (const r of remote) {
        const endedAt = await r.done;
        expect(r.frames.at(-1)?.event).toBe("end");
        expect(endedAt - killedAt).toBeLessThan(LEASE_MS + GRACE_MS + SLACK_MS);
      }
      const next = await createRun(cluster, threadId, { strategy: "reject", script: { steps: 1 } });
      expect(next.status, JSON.stringify(next.body)).toBe(200);
      expect((await waitForRun(cluster, threadId, next.row.run_id, isTerminal)).status).toBe("success");
    } finally {
      await cluster.restart(0);
    }
  }, 120_000);

  it("SIGSTOP of the owner past its lease, then SIGCONT: the run stays interrupted and its late writes are refused", async () => {
    const threadId = await createThread(cluster);
    const run = await startRun(cluster, threadId, { worker: 1, script: { steps: 40, delayMs: 200 } });
    await counted(run.run_id, 2);
    cluster.pause(1);
    const pausedAt = performance.now();
    try {
        const swept = await waitForRun(cluster, threadId, run.run_id, isTerminal, 30_000);
        expect(swept.status).toBe("interrupted");
        expect(performance.now() - pausedAt).toBeLessThan(LEASE_MS + GRACE_MS + SLACK_MS);
    } finally {
      cluster.resume(1);
    }
    const client = cluster.clientFor(0);
    const state = await client.threads.getState(threadId);
    // Newest first: a checkpoint written after the sweep would shift this page.
    const history = (await client.threads.getHistory(threadId, { limit: 100 })).map((h) => h.checkpoint.checkpoint_id);
    const row = await getRun(cluster, threadId, run.run_id, 2);
    // Long enough for the resumed worker to answer its model call, try its writes and find its lease gone.
    await until(async () => (await api(cluster, "/ok", { worker: 1 })).status === 200, "the resumed worker to answer");
    await new Promise((resolve) => setTimeout(resolve, 2000));
    expect(await getRun(cluster, threadId, run.run_id, 1)).toEqual(row);
    expect((await client.threads.getState(threadId)).checkpoint).toEqual(state.checkpoint);
    expect((await client.threads.getHistory(threadId, { limit: 100 })).map((h) => h.checkpoint.checkpoint_id)).toEqual(history);
    const next = await startRun(cluster, threadId, { worker: 1, strategy: "reject", script: { steps: 1 } });
    expect((await waitForRun(cluster, threadId, next.run_id, isTerminal)).status).toBe("success");
  }, 120_000);

  it("SIGTERM of one worker drains its runs to success while the other workers keep serving", async () => {
    const runs = await Promise.all(
      [0, 1].map(async () => {
        const threadId = await createThread(cluster, 2);
        return startRun(cluster, threadId, { worker: 2, script: { steps: 8, delayMs: 300 } });
      }),
    );
    await Promise.all(runs.map((run) => counted(run.run_id)));
    let exitedAt = 0;
    const terminating = cluster.terminate(2).then(() => (exitedAt = performance.now()));
    const served: string[] = [];
    while (exitedAt === 0 && served.length < 20) {
      const threadId = await createThread(cluster);
      const other = await startRun(cluster, threadId, { script: { steps: 1 } });
      expect((await waitForRun(cluster, threadId, other.run_id, isTerminal)).status).toBe("success");
      served.push(cluster.counter.callsOf(other.run_id)[0]!.worker);
    }
    await terminating;
    expect(served.length).toBeGreaterThan(0);
    expect(served.every((w) => !w.startsWith("2-"))).toBe(true);
    for (const run of runs) {
      const row = await getRun(cluster, run.thread_id, run.run_id);
      expect(row.status, JSON.stringify(row.error)).toBe("success");
      const calls = cluster.counter.callsOf(run.run_id);
      expect(calls).toHaveLength(8);
      expect(Math.max(...calls.map((c) => c.at))).toBeLessThan(exitedAt);
      expect((await collect(dataFrames(await joinStream(cluster, run.thread_id, run.run_id, 0)))).at(-1)?.event).toBe("end");
    }
  }, 120_000);
});
