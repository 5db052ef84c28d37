// The embedded client: the gateway's runs without HTTP. Everything here runs in-process through
// the public API (no sockets, no node:*), so it also runs under Deno and Bun.
import { describe, expect, it } from "vitest";
import { validateLeadConfig } from "../../../src/agents/app-config.ts";
import type { AuthorizationProvider } from "../../../src/authz/index.ts";
import { DeerflowError } from "../../../src/core/errors.ts";
import type { TaskInfo, TaskOutcome } from "../../../src/extension-api/lifecycle.ts";
import { HostExtensionRegistry, type LoadedExtensions } from "../../../src/extensions/registry.ts";
import { createGateway } from "../../../src/gateway/app.ts";
import { ROUTE_PERMISSIONS } from "../../../src/gateway/types.ts";
import { createDeerFlowClient, DeerFlowClient, EMBEDDED_PERMISSIONS, type ClientFrame, type DeerFlowClientOptions } from "../../../src/runtime/client.ts";
import type { RunAgentFactory } from "../../../src/runtime/runs/types.ts";
import { KeyValueCheckpointSaver } from "../../../src/runtime/kv-checkpointer.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { collect, deferred, eventually, scriptedAgentFactory, type Deferred } from "../runtime/runs-fixtures.ts";
import { allFrames, CountingBridge } from "./runs-harness.ts";

type Message = Record<string, unknown> & { type: string; tool_calls?: { name: string }[]; content?: unknown };

const toolCalls = (messages: readonly Record<string, unknown>[]) =>
  (messages as Message[]).flatMap((m) => (m.type === "ai" ? (m.tool_calls ?? []).map((c) => c.name) : []));

/** A client whose agent is the scripted one: `tool:<name>` calls that tool once, then answers `done: <text>`. */
async function scriptedClient(options: Partial<DeerFlowClientOptions> = {}) {
  const storage = options.storage ?? createMemoryKeyValue();
  const checkpointer = new KeyValueCheckpointSaver({ storage });
  const gates: { block: Deferred<string> } = { block: deferred<string>() };
  const client = await createDeerFlowClient({
    storage,
    checkpointer,
    agentFactory: scriptedAgentFactory(checkpointer, { gates }) as RunAgentFactory as DeerFlowClientOptions["agentFactory"],
    ...options,
  });
  return { client, gates, storage };
}

function lifecycle(log: string[]): LoadedExtensions {
  const registry = new HostExtensionRegistry();
  registry.attributedTo("test.lifecycle:install", (view) =>
    view.taskLifecycle({
      async onTaskStart(_app, _task, info: TaskInfo) {
        await Promise.resolve();
        log.push(`start:${info.kind}:${info.runId}:${info.threadId}`);
      },
      async onTaskStop(_app, _task, info: TaskInfo, outcome: TaskOutcome) {
        await Promise.resolve();
        log.push(`stop:${info.runId}:${outcome}`);
      },
    }),
  );
  return registry.build();
}

describe("DeerFlowClient.stream", () => {
  it("scenario G43 (embedded): yields the SSE frames: metadata {run_id, thread_id} first, token deltas as messages [chunk, metadata], end last with null data, an id on every frame", async () => {
    const client = await createDeerFlowClient();
    try {
      const frames = await collect(client.stream("Compare two sorting algorithms", { streamMode: ["values", "updates", "messages-tuple", "custom"] }));
      const first = frames[0]!;
      expect(first.event).toBe("metadata");
      const { run_id, thread_id } = first.data as { run_id: string; thread_id: string };
      expect(frames.at(-1)).toMatchObject({ event: "end", data: null });
      expect(frames.every((f) => typeof f.id === "string" && f.id !== "")).toBe(true);
      const events = new Set(frames.map((f) => f.event));
      expect([...events].sort()).toEqual(["custom", "end", "messages", "metadata", "updates", "values"]);
      const delta = frames.find((f) => f.event === "messages")!.data as [Message, Record<string, unknown>];
      expect(delta).toHaveLength(2);
      expect(delta[0].type).toBe("AIMessageChunk");
      const lastValues = frames.findLast((f) => f.event === "values")!.data as { messages: Message[] };
      expect(lastValues.messages.filter((m) => m.type === "human")).toHaveLength(1);
      // Frames are plain JSON, exactly what the SSE endpoint would serialize.
      expect(JSON.parse(JSON.stringify(frames))).toEqual(frames);
      expect((await client.runs.get(thread_id, run_id))?.status).toBe("success");
      expect((await client.threads.get(thread_id))?.owner_id).toBe("default");
    } finally {
      await client.close();
    }
  });

  it("carries the same frame sequence as the gateway's SSE stream for the same turn (a client over the gateway shares its RunManager)", async () => {
    const gateway = await createGateway({ config: validateLeadConfig({}, "test"), storage: createMemoryKeyValue() });
    try {
      const client = DeerFlowClient.fromGateway(gateway);
      expect(client.runManager).toBe(gateway.runs);
      const modes = ["values", "messages-tuple", "custom"] as const;
      const embedded = await collect(client.stream("Plan a garden", { streamMode: [...modes] }));
      const thread = (await (await gateway.fetch(new Request("http://127.0.0.1/api/threads", { method: "POST", body: "{}", headers: { "content-type": "application/json" } }))).json()) as { thread_id: string };
      const response = await gateway.fetch(
        new Request(`http://127.0.0.1/api/threads/${thread.thread_id}/runs/stream`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ input: { messages: [{ type: "human", content: "Plan a garden" }] }, stream_mode: modes }),
        }),
      );
      const http = await allFrames(response);
      expect(embedded.map((f) => f.event)).toEqual(http.filter((f) => f.comment === undefined).map((f) => f.event));
      const finalText = (frames: readonly { event?: string; data?: unknown }[]) =>
        ((frames.findLast((f) => f.event === "values")!.data as { messages: Message[] }).messages.at(-1) as Message).content;
      expect(finalText(embedded)).toEqual(finalText(http));
    } finally {
      await gateway.shutdown();
    }
  });

  it("scenario G47 (embedded): leaving the loop early cancels the run (interrupted); onDisconnect continue lets it finish; an aborted signal rejects with its reason", async () => {
    const { client, gates } = await scriptedClient();
    try {
      const cancelled = client.stream("tool:block", { threadId: "t-cancel" });
      let metadata: ClientFrame | undefined;
      for await (const frame of cancelled) {
        metadata = frame;
        break;
      }
      const { run_id: cancelledRun } = metadata!.data as { run_id: string };
      expect((await client.runs.join("t-cancel", cancelledRun)).run.status).toBe("interrupted");

      const kept = client.stream("tool:block", { threadId: "t-keep", onDisconnect: "continue" });
      const head = await kept.next();
      await kept.return(undefined);
      const { run_id: keptRun } = head.value!.data as { run_id: string };
      expect((await client.runs.get("t-keep", keptRun))?.status).toBe("running");
      gates.block.resolve("opened");
      expect((await client.runs.join("t-keep", keptRun)).run.status).toBe("success");

      gates.block = deferred<string>();
      const controller = new AbortController();
      const reason = new DeerflowError("stopped_by_test", "the test stopped reading");
      const aborted = client.stream("tool:block", { threadId: "t-abort", signal: controller.signal });
      const seen: string[] = [];
      await expect(
        (async () => {
          for await (const frame of aborted) {
            seen.push(frame.event);
            if (frame.event === "metadata") controller.abort(reason);
          }
        })(),
      ).rejects.toBe(reason);
      expect(seen).toEqual(["metadata"]);
      const [row] = await client.runs.list("t-abort");
      expect((await client.runs.join("t-abort", row!.run_id)).run.status).toBe("interrupted");
    } finally {
      gates.block.resolve("done");
      await client.close();
    }
  });

  it("scenario G45 (embedded): a second run on a busy thread is refused with run_conflict under reject; under interrupt the first ends interrupted and the second succeeds", async () => {
    const { client, gates } = await scriptedClient();
    try {
      const first = await client.runs.start("tool:block", { threadId: "t1" });
      await eventually(async () => (await client.runs.get("t1", first.run_id))?.status === "running");
      await expect(client.chat("again", { threadId: "t1" })).rejects.toMatchObject({ code: "run_conflict" });
      expect(await client.runs.list("t1")).toHaveLength(1);

      const second = await client.chat("again", { threadId: "t1", multitaskStrategy: "interrupt" });
      expect(second).toMatchObject({ status: "success", text: "done: again" });
      expect((await client.runs.get("t1", first.run_id))?.status).toBe("interrupted");
    } finally {
      gates.block.resolve("done");
      await client.close();
    }
  });

  it("runs.stream(threadId, runId, { lastEventId }) refuses a malformed cursor and replays nothing for one past the newest frame", async () => {
    const bridge = new CountingBridge();
    const { client, gates } = await scriptedClient({ bridge });
    try {
      const run = await client.runs.start("tool:block", { threadId: "t-resume" });
      // The run's first frame is out (its status row may say running a moment before that).
      const probe = client.runs.stream("t-resume", run.run_id)[Symbol.asyncIterator]();
      expect((await probe.next()).value).toMatchObject({ event: "metadata" });
      await probe.return?.(undefined);
      expect(() => client.runs.stream("t-resume", run.run_id, { lastEventId: "abc" })).toThrow(
        expect.objectContaining({ code: "invalid_last_event_id", message: expect.stringContaining("<epoch_ms>-<seq>") }),
      );
      const before = bridge.subscriptions;
      const past = collect(client.runs.stream("t-resume", run.run_id, { lastEventId: "1-99999" }));
      const all = collect(client.runs.stream("t-resume", run.run_id));
      // Both readers have placed their cursors while the run waits in its tool.
      await eventually(() => bridge.subscriptions === before + 2);
      gates.block.resolve("done");
      const [pastFrames, allFrames] = await Promise.all([past, all]);
      expect(allFrames[0]!.event).toBe("metadata");
      expect(pastFrames.length).toBeGreaterThan(0);
      expect(pastFrames.map((f) => f.event)).not.toContain("metadata");
      expect(pastFrames.map((f) => f.id)).toEqual(allFrames.slice(allFrames.length - pastFrames.length).map((f) => f.id));
      expect(pastFrames.at(-1)!.event).toBe("end");
    } finally {
      gates.block.resolve("done");
      await client.close();
    }
  });

  it("scenario G46 (embedded): cancel with rollback and wait restores the pre-run state; chat on a rolled-back run rejects with run_rolled_back", async () => {
    const { client, gates } = await scriptedClient();
    try {
      await client.chat("hello", { threadId: "t1" });
      const before = (await client.threads.state("t1")).values;
      const pending = client.chat("tool:block", { threadId: "t1" });
      await eventually(async () => (await client.runs.list("t1", { status: "running" })).length === 1);
      const [running] = await client.runs.list("t1", { status: "running" });
      const row = await client.runs.cancel("t1", running!.run_id, { action: "rollback", wait: true });
      expect(row).toMatchObject({ status: "error", error: { message: "Rolled back by user" } });
      await expect(pending).rejects.toMatchObject({ code: "run_rolled_back" });
      expect((await client.threads.state("t1")).values).toEqual(before);
      await expect(client.runs.cancel("t1", running!.run_id)).rejects.toMatchObject({ code: "run_not_cancellable" });
    } finally {
      gates.block.resolve("done");
      await client.close();
    }
  });
});

describe("DeerFlowClient.chat", () => {
  it("answers with the final AI text, the thread's messages and values; a second turn on the same thread sees the first", async () => {
    const client = await createDeerFlowClient();
    try {
      const first = await client.chat("Write a haiku about rivers");
      expect(first.status).toBe("success");
      expect(first.text).toContain('Here is what I did for "Write a haiku about rivers"');
      expect(toolCalls(first.messages)).toEqual(["write_file", "bash"]);
      expect(first.values.title).toBeTypeOf("string");
      expect(first.interrupts).toEqual([]);

      const second = await client.chat("And one about lakes", { threadId: first.threadId });
      expect(second.threadId).toBe(first.threadId);
      expect(second.runId).not.toBe(first.runId);
      expect(second.text).toContain("one about lakes");
      expect(second.messages.filter((m) => m.type === "human")).toHaveLength(2);
      expect((await client.runs.list(first.threadId)).map((r) => r.status)).toEqual(["success", "success"]);
      expect((await client.threads.history(first.threadId)).length).toBeGreaterThan(2);
    } finally {
      await client.close();
    }
  });

  it("round-trips an interrupt: values.__interrupt__ out (status interrupted), command.resume in", async () => {
    const { client } = await scriptedClient();
    try {
      const paused = await client.chat("tool:ask", { threadId: "t1" });
      expect(paused.status).toBe("interrupted");
      expect(paused.interrupts).toEqual([expect.objectContaining({ value: { question: "continue?" } })]);
      expect(paused.text).toBe("");

      const streamed = await collect(client.stream(null, { threadId: "t1", command: { resume: "yes" }, streamMode: ["values"] }));
      expect(streamed[0]!.event).toBe("metadata");
      const last = streamed.findLast((f) => f.event === "values")!.data as { messages: Message[] };
      expect(last.messages.map((m) => m.content)).toEqual(["tool:ask", "", "user said yes", "done: tool:ask"]);
      expect((await client.threads.state("t1")).interrupts).toEqual([]);
    } finally {
      await client.close();
    }
  });

  it("scenario G22 (embedded): extension lifecycle hooks fire around embedded runs, start before metadata and stop before end", async () => {
    const log: string[] = [];
    const { client } = await scriptedClient({ extensions: lifecycle(log) });
    try {
      const frames: string[] = [];
      for await (const frame of client.stream("hi", { threadId: "t1", streamMode: ["values"] })) {
        frames.push(frame.event);
        log.push(`frame:${frame.event}`);
      }
      const [run] = await client.runs.list("t1");
      const ordered = log.filter((entry) => !entry.startsWith("frame:values"));
      expect(ordered).toEqual([`start:lead:${run!.run_id}:t1`, "frame:metadata", `stop:${run!.run_id}:completed`, "frame:end"]);
    } finally {
      await client.close();
    }
  });
});

describe("embedded identity", () => {
  /** Grants `bash` only to principals whose authz attributes put them in the group "admins". */
  const adminsOnlyBash: AuthorizationProvider = {
    name: "admins-only-bash",
    authorize: () => ({ allowed: true, rule: "allow" }),
    filterResources: (principal, resource, names) => {
      if (resource !== "tool") return names;
      const groups = principal.attributes.groups;
      return names.filter((name) => name !== "bash" || (Array.isArray(groups) && groups.includes("admins")));
    },
  };

  it("keys the agent cache by the whole principal, copied at call time: mutating the caller's user object never serves a tool set built for the old identity", async () => {
    const client = await createDeerFlowClient({ config: { authorization: { enabled: true } }, authorizationProvider: adminsOnlyBash });
    try {
      const user = { id: "u1", role: "user", authzAttributes: { groups: ["admins"] } };
      const asAdmin = client.chat("Draft a memo", { user });
      // The call already copied who it acts for: this edit reaches the next call, not this one.
      user.authzAttributes.groups[0] = "guests";
      expect(toolCalls((await asAdmin).messages)).toEqual(["write_file", "bash"]);

      const asGuest = await client.chat("Draft a memo", { user });
      expect(toolCalls(asGuest.messages)).toEqual(["write_file", "read_file"]);

      user.authzAttributes.groups = ["admins"];
      expect(toolCalls((await client.chat("Draft a memo", { user })).messages)).toEqual(["write_file", "bash"]);

      // The client's own user is copied once, at construction.
      const own = { id: "u2", role: "user", authzAttributes: { groups: ["guests"] } };
      const scoped = client.withUser(own);
      own.authzAttributes.groups = ["admins"];
      expect(scoped.user.authzAttributes).toEqual({ groups: ["guests"] });
      expect(toolCalls((await scoped.chat("Draft a memo")).messages)).toEqual(["write_file", "read_file"]);
    } finally {
      await client.close();
    }
  });

  it("trusts an in-process caller's identity fields (context keys or options.user, the latter winning), which HTTP callers get stripped", async () => {
    const storage = createMemoryKeyValue();
    const checkpointer = new KeyValueCheckpointSaver({ storage });
    const gateway = await createGateway({
      config: validateLeadConfig({}, "test"),
      storage,
      checkpointer,
      agentFactory: scriptedAgentFactory(checkpointer),
    });
    try {
      const client = DeerFlowClient.fromGateway(gateway);
      const whoami = async (result: Promise<{ messages: readonly Record<string, unknown>[] }>) =>
        JSON.parse(String((await result).messages.find((m) => m.type === "tool")!.content)) as Record<string, unknown>;

      const fromContext = await whoami(client.chat("tool:whoami", { context: { user_id: "bob", user_role: "analyst", is_internal: true } }));
      expect(fromContext).toMatchObject({ user_id: "bob", user_role: "analyst", is_internal: true });
      const overridden = await whoami(client.chat("tool:whoami", { context: { user_id: "bob" }, user: { id: "carol", role: "user" } }));
      expect(overridden).toMatchObject({ user_id: "carol", user_role: "user", is_internal: false });

      const threadId = (await client.threads.create({ user: { id: "default" } })).thread_id;
      const response = await gateway.fetch(
        new Request(`http://127.0.0.1/api/threads/${threadId}/runs/wait`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ input: { messages: [{ type: "human", content: "tool:whoami" }] }, context: { user_id: "bob", user_role: "analyst", is_internal: true } }),
        }),
      );
      const values = (await response.json()) as { messages: Message[] };
      const viaHttp = JSON.parse(String(values.messages.find((m) => m.type === "tool")!.content)) as Record<string, unknown>;
      expect(viaHttp).toMatchObject({ user_id: "default", user_role: "admin", is_internal: false });
    } finally {
      await gateway.shutdown();
    }
  });

  it("holds all six route permissions, so a gateway's agent factory sees a complete user", () => {
    expect([...EMBEDDED_PERMISSIONS].sort()).toEqual([...ROUTE_PERMISSIONS].sort());
  });

  it("never shows one user another's thread", async () => {
    const { client } = await scriptedClient();
    try {
      const alice = client.withUser({ id: "alice", role: "user" });
      const bob = client.withUser({ id: "bob", role: "user" });
      const { threadId } = await alice.chat("hello");
      expect((await alice.threads.list()).map((t) => t.thread_id)).toEqual([threadId]);
      expect(await bob.threads.list()).toEqual([]);
      expect(await bob.threads.get(threadId)).toBeUndefined();
      await expect(bob.threads.state(threadId)).rejects.toMatchObject({ code: "thread_not_found" });
      await expect(bob.runs.list(threadId)).rejects.toMatchObject({ code: "thread_not_found" });
      await expect(bob.chat("hi", { threadId })).rejects.toMatchObject({ code: "thread_not_found" });
      expect(await bob.threads.delete(threadId).catch((e: DeerflowError) => e.code)).toBe("thread_not_found");
      // A trusted caller may act as the owner.
      expect((await bob.threads.get(threadId, { user: { id: "alice" } }))?.thread_id).toBe(threadId);
    } finally {
      await client.close();
    }
  });
});

describe("DeerFlowClient threads, errors and lifetime", () => {
  it("reads, writes and deletes threads; a busy thread refuses state writes and deletion", async () => {
    const { client, gates } = await scriptedClient();
    try {
      const thread = await client.threads.create({ threadId: "t1", metadata: { topic: "x" } });
      expect(thread).toMatchObject({ thread_id: "t1", owner_id: "default", metadata: { topic: "x" } });
      const { checkpoint } = await client.threads.updateState("t1", { values: { title: "Named" }, asNode: "model" });
      expect(checkpoint.checkpoint_id).toBeTypeOf("string");
      expect((await client.threads.state("t1")).values.title).toBe("Named");
      expect((await client.threads.get("t1"))?.display_name).toBe("Named");
      expect(await client.threads.list({ metadata: { topic: "x" } })).toHaveLength(1);

      const run = await client.runs.start("tool:block", { threadId: "t1" });
      await expect(client.threads.delete("t1")).rejects.toMatchObject({ code: "thread_busy" });
      await expect(client.threads.updateState("t1", { values: { title: "No" } })).rejects.toMatchObject({ code: "thread_busy" });
      gates.block.resolve("ok");
      expect((await client.runs.join("t1", run.run_id)).run.status).toBe("success");

      expect(await client.threads.delete("t1")).toBe(true);
      expect(await client.threads.get("t1")).toBeUndefined();
      await expect(client.threads.history("t1")).rejects.toMatchObject({ code: "thread_not_found" });
      expect(await client.threads.delete("t1")).toBe(false);
    } finally {
      gates.block.resolve("done");
      await client.close();
    }
  });

  it("refuses bad input with a stable code before any run or thread exists", async () => {
    const { client } = await scriptedClient();
    try {
      const codeOf = async (work: () => unknown) => {
        try {
          await work();
          return "no error";
        } catch (error) {
          return `${(error as DeerflowError).code}: ${(error as Error).message}`;
        }
      };
      expect(await codeOf(() => client.chat("hi", { threadID: "t1" } as never))).toMatch(/^invalid_client_options: run options: threadID: unknown option/);
      expect(await codeOf(() => client.stream("hi", { streamMode: ["events"] } as never))).toMatch(/^invalid_client_options: run options: streamMode/);
      expect(await codeOf(() => client.chat("hi", { threadId: "../etc" }))).toMatch(/^invalid_client_options: run options: threadId/);
      expect(await codeOf(() => client.chat({ messages: [{ nope: 1 }] }))).toMatch(/^invalid_client_input: input\.messages\[0\]/);
      expect(await codeOf(() => client.chat(null))).toMatch(/^invalid_client_input/);
      expect(await codeOf(() => client.chat("hi", { context: { is_internal: "yes" } }))).toMatch(/^invalid_client_options: context\.is_internal/);
      expect(await codeOf(() => client.chat("hi", { user: { authzAttributes: ["admins"] } } as never))).toMatch(/^invalid_client_options/);
      expect(await codeOf(() => client.chat("hi", { model: "gpt-9" }))).toMatch(/^unknown_model: /);
      expect(await client.threads.list()).toHaveLength(0);
      await expect(createDeerFlowClient({ config: { models: [{ name: "x", use: "gpt" }] } })).rejects.toMatchObject({ code: "invalid_client_config" });
      await expect(createDeerFlowClient({ user: { id: "" } })).rejects.toMatchObject({ code: "invalid_client_options" });
    } finally {
      await client.close();
    }
  });

  it("close() drains in-flight runs, refuses later calls with client_closed, and leaves a storage it was given open", async () => {
    const storage = createMemoryKeyValue();
    const { client } = await scriptedClient({ storage });
    const running = await client.runs.start("tool:block", { threadId: "t1" });
    await eventually(async () => (await client.runs.get("t1", running.run_id))?.status === "running");
    await client.close();
    await client.close();
    expect(() => client.stream("hi")).toThrow(expect.objectContaining({ code: "client_closed" }));
    await expect(client.chat("hi")).rejects.toMatchObject({ code: "client_closed" });
    // The drain persisted the interrupted run in the caller's storage, which is still usable.
    const reopened = await scriptedClient({ storage });
    try {
      expect((await reopened.client.runs.get("t1", running.run_id))?.status).toBe("interrupted");
    } finally {
      await reopened.client.close();
    }
  });

  it("fromGateway refuses a gateway whose runs part exposes no RunManager", async () => {
    const gateway = await createGateway({ config: validateLeadConfig({}, "test"), storage: createMemoryKeyValue(), registerExtraRoutes: () => undefined });
    try {
      expect(() => DeerFlowClient.fromGateway(gateway)).toThrow(expect.objectContaining({ code: "gateway_runs_unavailable" }));
    } finally {
      await gateway.shutdown();
    }
  });

  it("shares one RunManager with the gateway: a run started in-process blocks an HTTP run on the same thread (409) and shows in its listing", async () => {
    const storage = createMemoryKeyValue();
    const checkpointer = new KeyValueCheckpointSaver({ storage });
    const gates = { block: deferred<string>() };
    const gateway = await createGateway({ config: validateLeadConfig({}, "test"), storage, checkpointer, agentFactory: scriptedAgentFactory(checkpointer, { gates }) });
    try {
      const client = DeerFlowClient.fromGateway(gateway);
      const run = await client.runs.start("tool:block", { threadId: "shared" });
      const post = (path: string, body: unknown) =>
        gateway.fetch(new Request(`http://127.0.0.1${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) }));
      const conflict = await post("/api/threads/shared/runs", { input: { messages: [{ type: "human", content: "hi" }] } });
      expect(conflict.status).toBe(409);
      const listed = (await (await gateway.fetch(new Request("http://127.0.0.1/api/threads/shared/runs"))).json()) as { run_id: string }[];
      expect(listed.map((r) => r.run_id)).toEqual([run.run_id]);
      gates.block.resolve("ok");
      expect((await client.runs.join("shared", run.run_id)).run.status).toBe("success");
      const thread = (await (await gateway.fetch(new Request("http://127.0.0.1/api/threads/shared"))).json()) as { values: { messages: Message[] } };
      expect(thread.values.messages.at(-1)?.content).toBe("done: tool:block");
      await client.close();
      // Closing a client built over a gateway closes nothing of the gateway's.
      expect((await gateway.fetch(new Request("http://127.0.0.1/api/threads/shared"))).status).toBe(200);
    } finally {
      gates.block.resolve("done");
      await gateway.shutdown();
    }
  });
});
