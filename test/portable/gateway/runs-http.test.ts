import { MemoryStreamBridge } from "../../../src/runtime/runs/stream-bridge.ts";
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../../src/core/clock.ts";
import type { TaskInfo, TaskOutcome } from "../../../src/extension-api/lifecycle.ts";
import { HostExtensionRegistry } from "../../../src/extensions/registry.ts";
import { eventually } from "../runtime/runs-fixtures.ts";
import { allFrames, human, runsHarness, sseFrames, type SseFrame } from "./runs-harness.ts";

async function json(res: Response): Promise<Record<string, unknown>> {
  return (await res.json()) as Record<string, unknown>;
}

describe("run routes over app.fetch", () => {
  it("scenario G43: runs/stream answers with Content-Location, metadata first, messages as [chunk, metadata], end last with data null", async () => {
    const gw = runsHarness();
    const tid = await gw.thread();
    const res = await gw.request("POST", `/api/threads/${tid}/runs/stream`, { ...human("tool:note"), stream_mode: ["values", "messages-tuple", "custom"] });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    expect(res.headers.get("cache-control")).toBe("no-cache");
    expect(res.headers.get("x-accel-buffering")).toBe("no");
    expect(res.headers.get("access-control-expose-headers")).toContain("Content-Location");
    const location = res.headers.get("content-location")!;
    expect(location).toMatch(new RegExp(`^/api/threads/${tid}/runs/[0-9a-f-]{36}$`));
    const runId = location.split("/").at(-1)!;
    const frames = await allFrames(res);
    expect(frames[0]).toMatchObject({ event: "metadata", data: { run_id: runId, thread_id: tid } });
    expect(frames.at(-1)).toMatchObject({ event: "end", data: null });
    expect(frames.every((f) => f.comment !== undefined || /^\d+-\d+$/.test(f.id ?? ""))).toBe(true);
    const messages = frames.filter((f) => f.event === "messages");
    expect(messages.length).toBeGreaterThan(0);
    for (const frame of messages) {
      const [chunk, metadata] = frame.data as [Record<string, unknown>, Record<string, unknown>];
      expect(typeof chunk.type).toBe("string");
      expect(metadata).toMatchObject({ langgraph_node: expect.any(String) });
    }
    expect(frames.find((f) => f.event === "custom")?.data).toEqual({ type: "task_running", message: "working" });
    expect(new Set(frames.map((f) => f.event))).toEqual(new Set(["metadata", "values", "messages", "custom", "end"]));
  });

  it("scenario G44: an unsupported mode, option or unknown field is a 422 naming it and creates no run; enqueue and stream_resumable:false are accepted", async () => {
    const gw = runsHarness();
    const tid = await gw.thread();
    const refused: Array<[Record<string, unknown>, string]> = [
      [{ stream_mode: "events" }, "stream_mode"],
      [{ stream_mode: ["values", "messages"] }, '"messages"'],
      [{ webhook: "https://example.com/hook" }, "webhook"],
      [{ bogus: 1 }, "bogus: unknown field"],
      [{ if_not_exists: "reject" }, "if_not_exists"],
      [{ stream_resumable: true }, "stream_resumable"],
      [{ multitask_strategy: "queue" }, "multitask_strategy"],
      [{ config: { configurable: { thread_id: "../x" } } }, "thread_id"],
      [{ metadata: { api_key: "sk-1" } }, "metadata.api_key"],
    ];
    for (const [extra, named] of refused) {
      for (const path of ["runs", "runs/stream", "runs/wait"]) {
        const res = await gw.request("POST", `/api/threads/${tid}/${path}`, { ...human("hi"), ...extra });
        expect(res.status, JSON.stringify(extra)).toBe(422);
        expect(String((await json(res)).detail)).toContain(named);
      }
    }
    const malformed = await gw.request("POST", `/api/threads/${tid}/runs`, { input: { messages: [{ type: "human", content: "ok" }, { nope: true }] } });
    expect(malformed.status).toBe(400);
    expect(String((await json(malformed)).detail)).toContain("input.messages[1]");
    expect(await json(await gw.request("GET", `/api/threads/${tid}/runs`)).catch(() => null)).toEqual([]);
    const accepted = await gw.request("POST", `/api/threads/${tid}/runs`, { ...human("hi"), multitask_strategy: "enqueue", stream_resumable: false });
    expect(accepted.status).toBe(200);
    expect(await json(accepted)).toMatchObject({ status: "pending", multitask_strategy: "enqueue" });
  });

  it("creates background runs, gets, lists, joins and waits; unknown runs and other users' threads are 404", async () => {
    const gw = runsHarness();
    const tid = await gw.thread();
    const created = await gw.request("POST", `/api/threads/${tid}/runs`, human("hello"));
    const run = await json(created);
    expect(created.headers.get("content-location")).toBe(`/api/threads/${tid}/runs/${run.run_id}`);
    expect(run).toMatchObject({ thread_id: tid, assistant_id: "lead_agent", status: "pending" });
    expect(run).not.toHaveProperty("owner_id");
    const joined = await json(await gw.request("GET", `/api/threads/${tid}/runs/${run.run_id}/join`));
    expect((joined.messages as Array<{ type: string }>).map((m) => m.type)).toEqual(["human", "ai"]);
    expect(await json(await gw.request("GET", `/api/threads/${tid}/runs/${run.run_id}`))).toMatchObject({ status: "success" });
    const waited = await json(await gw.request("POST", `/api/threads/${tid}/runs/wait`, human("again")));
    expect((waited.messages as unknown[]).length).toBe(4);
    const listed = (await (await gw.request("GET", `/api/threads/${tid}/runs?limit=1`)).json()) as Array<Record<string, unknown>>;
    expect(listed).toHaveLength(1);
    expect(listed[0]!.run_id).not.toBe(run.run_id);
    expect((await gw.request("GET", `/api/threads/${tid}/runs?status=bogus`)).status).toBe(422);
    expect((await gw.request("GET", `/api/threads/${tid}/runs/nope`)).status).toBe(404);
    expect(await json(await gw.request("GET", `/api/threads/${tid}/runs/nope`))).toEqual({ detail: "Run nope not found" });
    // Bob cannot see, run on or cancel Alice's thread: it answers as if it did not exist.
    const bob = { "x-test-user": "bob" };
    expect((await gw.request("GET", `/api/threads/${tid}/runs`, undefined, bob)).status).toBe(404);
    expect((await gw.request("GET", `/api/threads/${tid}/runs/${run.run_id}`, undefined, bob)).status).toBe(404);
    expect((await gw.request("POST", `/api/threads/${tid}/runs`, human("x"), bob)).status).toBe(404);
    expect((await gw.request("POST", `/api/threads/${tid}/runs/${run.run_id}/cancel`, undefined, bob)).status).toBe(404);
    // A missing thread is a 404 for create (requireExisting).
    expect((await gw.request("POST", `/api/threads/missing/runs`, human("x"))).status).toBe(404);
    // A finished run can be deleted; an active one must be cancelled first.
    expect((await gw.request("DELETE", `/api/threads/${tid}/runs/${run.run_id}`)).status).toBe(204);
    expect((await gw.request("GET", `/api/threads/${tid}/runs/${run.run_id}`)).status).toBe(404);
    const active = await json(await gw.request("POST", `/api/threads/${tid}/runs`, human("tool:block")));
    expect((await gw.request("DELETE", `/api/threads/${tid}/runs/${active.run_id}`)).status).toBe(409);
    gw.gates.block.resolve("done");
    await gw.runs.join(tid, String(active.run_id));
  });

  it("checks runs:create, runs:read and runs:cancel through the guard", async () => {
    const gw = runsHarness();
    const tid = await gw.thread();
    const denied = await gw.request("POST", `/api/threads/${tid}/runs`, human("x"), { "x-test-deny": "runs:create" });
    expect(denied.status).toBe(403);
    expect(await json(denied)).toEqual({ detail: "Permission denied: runs:create" });
    expect((await gw.request("GET", `/api/threads/${tid}/runs`, undefined, { "x-test-deny": "runs:read" })).status).toBe(403);
    const run = await json(await gw.request("POST", `/api/threads/${tid}/runs/wait`, human("x")));
    expect(run).toHaveProperty("messages");
    const [row] = (await (await gw.request("GET", `/api/threads/${tid}/runs`)).json()) as Array<{ run_id: string }>;
    expect((await gw.request("POST", `/api/threads/${tid}/runs/${row!.run_id}/cancel`, undefined, { "x-test-deny": "runs:cancel" })).status).toBe(403);
    expect(await json(await gw.request("GET", `/api/threads/${tid}/runs`)).catch(() => [])).not.toBeNull();
  });

  it("scenario G45: reject is a 409; interrupt ends the first run interrupted and the second succeeds after it", async () => {
    const gw = runsHarness();
    const tid = await gw.thread();
    const first = await json(await gw.request("POST", `/api/threads/${tid}/runs`, human("tool:block")));
    await eventually(async () => (await json(await gw.request("GET", `/api/threads/${tid}/runs/${first.run_id}`))).status === "running");
    const rejected = await gw.request("POST", `/api/threads/${tid}/runs/stream`, human("second"));
    expect(rejected.status).toBe(409);
    expect(String((await json(rejected)).detail)).toContain("multitask_strategy");
    const second = await gw.request("POST", `/api/threads/${tid}/runs/wait`, { ...human("second"), multitask_strategy: "interrupt" });
    expect(second.status).toBe(200);
    expect(await json(await gw.request("GET", `/api/threads/${tid}/runs/${first.run_id}`))).toMatchObject({ status: "interrupted" });
    const runs = (await (await gw.request("GET", `/api/threads/${tid}/runs`)).json()) as Array<{ status: string }>;
    expect(runs.map((r) => r.status)).toEqual(["success", "interrupted"]);
  });

  it("scenario G46: cancel?action=rollback&wait=true is 204, the run is error 'Rolled back by user' and the state is the pre-run state; cancelling a successful run is 409", async () => {
    const gw = runsHarness();
    const tid = await gw.thread();
    const before = await json(await gw.request("POST", `/api/threads/${tid}/runs/wait`, human("hello")));
    const run = await json(await gw.request("POST", `/api/threads/${tid}/runs`, human("tool:block")));
    await eventually(async () => ((await gw.runs.threadValues(tid))!.messages as unknown[]).length > 2);
    const cancelled = await gw.request("POST", `/api/threads/${tid}/runs/${run.run_id}/cancel?action=rollback&wait=true`);
    expect(cancelled.status).toBe(204);
    expect(await json(await gw.request("GET", `/api/threads/${tid}/runs/${run.run_id}`))).toMatchObject({
      status: "error",
      error: { message: "Rolled back by user" },
    });
    expect(await gw.runs.threadValues(tid)).toEqual(before);
    const [done] = (await (await gw.request("GET", `/api/threads/${tid}/runs?status=success`)).json()) as Array<{ run_id: string }>;
    const refused = await gw.request("POST", `/api/threads/${tid}/runs/${done!.run_id}/cancel`);
    expect(refused.status).toBe(409);
    expect(String((await json(refused)).detail)).toContain("not cancellable");
    expect((await gw.request("POST", `/api/threads/${tid}/runs/${done!.run_id}/cancel?action=explode`)).status).toBe(422);
  });

  it("cancel without wait is 202 and the stop button (POST …/stream?action=interrupt) cancels then streams to end", async () => {
    const gw = runsHarness();
    const tid = await gw.thread();
    const first = await json(await gw.request("POST", `/api/threads/${tid}/runs`, human("tool:block")));
    await eventually(async () => (await json(await gw.request("GET", `/api/threads/${tid}/runs/${first.run_id}`))).status === "running");
    expect((await gw.request("POST", `/api/threads/${tid}/runs/${first.run_id}/cancel`)).status).toBe(202);
    await gw.runs.join(tid, String(first.run_id));
    const second = await json(await gw.request("POST", `/api/threads/${tid}/runs`, human("tool:block")));
    await eventually(async () => (await json(await gw.request("GET", `/api/threads/${tid}/runs/${second.run_id}`))).status === "running");
    const stopped = await gw.request("POST", `/api/threads/${tid}/runs/${second.run_id}/stream?action=interrupt`);
    expect(stopped.status).toBe(200);
    const frames = await allFrames(stopped);
    expect(frames[0]!.event).toBe("metadata");
    expect(frames.at(-1)!.event).toBe("end");
    expect(await json(await gw.request("GET", `/api/threads/${tid}/runs/${second.run_id}`))).toMatchObject({ status: "interrupted" });
  });

  it("scenario G47: a disconnect interrupts a run streamed with the default on_disconnect", async () => {
    const gw = runsHarness();
    const tid = await gw.thread();
    const res = await gw.request("POST", `/api/threads/${tid}/runs/stream`, human("tool:block"));
    const runId = res.headers.get("content-location")!.split("/").at(-1)!;
    const frames = sseFrames(res.body!);
    expect((await frames.next()).value).toMatchObject({ event: "metadata" });
    await frames.return(undefined);
    await eventually(async () => (await json(await gw.request("GET", `/api/threads/${tid}/runs/${runId}`))).status === "interrupted");
  });

  it("scenario G47: with on_disconnect=continue the run reaches success after the client left", async () => {
    const gw = runsHarness();
    const tid = await gw.thread();
    const res = await gw.request("POST", `/api/threads/${tid}/runs/stream`, { ...human("tool:block"), on_disconnect: "continue" });
    const runId = res.headers.get("content-location")!.split("/").at(-1)!;
    const frames = sseFrames(res.body!);
    expect((await frames.next()).value).toMatchObject({ event: "metadata" });
    await frames.return(undefined);
    gw.gates.block.resolve("released");
    expect((await gw.runs.join(tid, runId)).status).toBe("success");
  });

  it("scenario G47: reconnecting with a Last-Event-ID older than the window yields one gap frame and does not cancel the run", async () => {
    const clock = new ManualClock(1_800_000_000_000);
    const gw = runsHarness({ clock, retain: 3 });
    const tid = await gw.thread();
    const run = await json(await gw.request("POST", `/api/threads/${tid}/runs`, { ...human("tool:block"), stream_mode: ["values", "updates", "messages-tuple"] }));
    await eventually(async () => ((await gw.runs.threadValues(tid))?.messages as unknown[] | undefined)?.length === 2);
    // The run streams while the graph goes on; wait until the metadata frame has left the 3-frame window.
    await eventually(() => (gw.runs.bridge as MemoryStreamBridge).published(String(run.run_id)) > 4);
    const res = await gw.request("GET", `/api/threads/${tid}/runs/${run.run_id}/stream?cancel_on_disconnect=1`, undefined, {
      "Last-Event-ID": `${clock.now()}-0`,
    });
    const frames = await allFrames(res);
    expect(frames).toHaveLength(1);
    expect(frames[0]).toMatchObject({ event: "gap", data: { code: "stream_replay_gap", requested_event_id: `${clock.now()}-0`, recovery: "reload_durable_state" } });
    expect(frames[0]!.id).toBeUndefined();
    expect(await json(await gw.request("GET", `/api/threads/${tid}/runs/${run.run_id}`))).toMatchObject({ status: "running" });
    // A reconnect from a retained id replays the rest and follows the run to its end.
    const latest = await gw.request("GET", `/api/threads/${tid}/runs/${run.run_id}/stream`);
    const reading = allFrames(latest);
    gw.gates.block.resolve("released");
    const tail = await reading;
    expect(tail.at(-1)).toMatchObject({ event: "end" });
    expect((await gw.runs.join(tid, String(run.run_id))).status).toBe("success");
  });

  it("sends ': heartbeat' at a steady cadence while a run is quiet (clock-driven)", async () => {
    const clock = new ManualClock(0);
    const gw = runsHarness({ clock, heartbeatMs: 15_000 });
    const tid = await gw.thread();
    const res = await gw.request("POST", `/api/threads/${tid}/runs/stream`, { ...human("tool:block"), on_disconnect: "continue" });
    const frames = sseFrames(res.body!);
    const seen: SseFrame[] = [];
    const next = async () => {
      const item = (await frames.next()).value as SseFrame;
      seen.push(item);
      return item;
    };
    while ((await next()).event !== "values" || seen.filter((f) => f.event === "values").length < 2) {
      // The input and the tool-call steps have been published; the run now waits in the tool.
    }
    const firstBeat = next();
    await clock.advance(15_000);
    expect(await firstBeat).toEqual({ comment: "heartbeat" });
    const secondBeat = next();
    await clock.advance(15_000);
    expect(await secondBeat).toEqual({ comment: "heartbeat" });
    gw.gates.block.resolve("done");
    const rest: SseFrame[] = [];
    for (;;) {
      const frame = await next();
      rest.push(frame);
      if (frame.event === "end") break;
    }
    await frames.return(undefined);
  });

  it("scenarios G22, G23: on_task_start finishes before the metadata frame and on_task_stop before end; a failing run reports failed", async () => {
    const log: string[] = [];
    const registry = new HostExtensionRegistry();
    registry.attributedTo("test.lifecycle:install", (view) =>
      view.taskLifecycle({
        async onTaskStart(_app, _task, info: TaskInfo) {
          await new Promise((resolve) => setTimeout(resolve, 5));
          log.push(`start:${info.kind}:${info.taskId}`);
        },
        async onTaskStop(_app, _task, info: TaskInfo, outcome: TaskOutcome) {
          await new Promise((resolve) => setTimeout(resolve, 5));
          log.push(`stop:${outcome}`);
        },
      }),
    );
    const gw = runsHarness({ extensions: registry.build() });
    const tid = await gw.thread();
    for (const text of ["hello", "tool:boom"]) {
      const res = await gw.request("POST", `/api/threads/${tid}/runs/stream`, human(text));
      for await (const frame of sseFrames(res.body!)) if (frame.event) log.push(`frame:${frame.event}`);
    }
    const firstRun = log.slice(0, log.indexOf("frame:end") + 1);
    expect(firstRun[0]).toMatch(/^start:lead:/);
    expect(firstRun[1]).toBe("frame:metadata");
    expect(firstRun.slice(-2)).toEqual(["stop:completed", "frame:end"]);
    const secondRun = log.slice(firstRun.length);
    expect(secondRun.slice(0, 2).map((e) => e.split(":")[0])).toEqual(["start", "frame"]);
    expect(secondRun.slice(-3)).toEqual(["frame:error", "stop:failed", "frame:end"]);
  });

  it("stateless runs: /runs/stream creates a thread owned by the caller; /runs/wait uses config.configurable.thread_id; a foreign one is 404", async () => {
    const gw = runsHarness();
    const res = await gw.request("POST", "/api/runs/stream", human("hi"));
    expect(res.status).toBe(200);
    const [, , , tid, , runId] = res.headers.get("content-location")!.split("/");
    const frames = await allFrames(res);
    expect(frames[0]).toMatchObject({ event: "metadata", data: { run_id: runId, thread_id: tid } });
    expect(await gw.threads.get(tid!)).toMatchObject({ owner_id: "alice" });
    const waited = await json(await gw.request("POST", "/api/runs/wait", { ...human("named"), config: { configurable: { thread_id: "mine" } } }));
    expect((waited.messages as unknown[]).length).toBe(2);
    expect(await gw.threads.get("mine")).toMatchObject({ owner_id: "alice" });
    const foreign = await gw.request("POST", "/api/runs/wait", { ...human("x"), config: { configurable: { thread_id: "mine" } } }, { "x-test-user": "bob" });
    expect(foreign.status).toBe(404);
  });

  it("/wait reports a failed run as __error__ and a paused run with its __interrupt__", async () => {
    const gw = runsHarness();
    const tid = await gw.thread();
    const failed = await json(await gw.request("POST", `/api/threads/${tid}/runs/wait`, human("tool:boom")));
    expect(failed.__error__).toMatchObject({ error: "TypeError", message: expect.stringContaining("exploded") });
    const paused = await json(await gw.request("POST", `/api/threads/${tid}/runs/wait`, human("tool:ask")));
    expect(paused.__interrupt__).toEqual([{ id: expect.any(String), value: { question: "continue?" } }]);
    const resumed = await json(await gw.request("POST", `/api/threads/${tid}/runs/wait`, { command: { resume: "yes" } }));
    expect((resumed.messages as Array<{ type: string; content: string }>).find((m) => m.content === "user said yes")).toBeDefined();
  });
});
