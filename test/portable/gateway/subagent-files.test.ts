// Spec (middleware-chain.md #6): "The lead runtime normally owns the thread's physical Agent-skill projection;
// delegated subagents and the prompt-only bootstrap agent are non-owners, so their narrower discovery
// allowlists never rebuild the shared thread view or force eager sandbox acquisition."
// Through the real gateway on this runtime's own server: a delegated subagent writes a file, the lead
// reads it once the task returns, and a new gateway over the same storage (a restart) still has it;
// and a subagent's LoopDetection warning lands in the lead run's journal (middleware-chain.md #28).
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Hono } from "hono";
import { afterEach, describe, expect, it } from "vitest";
import { createFsKeyValue } from "../../../adapters/shared/fs-key-value.ts";
import { createGateway } from "../../../src/gateway/app.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { runtimeServe } from "./runtime-serve.ts";
import { scriptedCompletion, scriptedModelConfig, scriptedModelEnv } from "./scripted-model.ts";

const { runtime, serve } = await runtimeServe();

const PATH = "/mnt/user-data/outputs/from-subagent.md";
const CONTENT = "written by the delegated subagent";

type Body = { messages: Array<{ role: string; content: unknown }>; tools?: Array<{ function: { name: string } }> };

/**
 * One OpenAI-compatible endpoint for both agents. The lead (it has the task tool) delegates, then
 * reads the file, then answers; the subagent writes the file, then answers.
 */
function scriptedModel(seenByLead: string[]): Hono {
  const app = new Hono();
  app.post("/v1/chat/completions", async (c) => {
    const body = (await c.req.json()) as Body;
    const isLead = (body.tools ?? []).some((tool) => tool.function.name === "task");
    const toolResults = body.messages.filter((m) => m.role === "tool");
    const call = (name: string, args: Record<string, unknown>) => ({
      role: "assistant",
      content: null,
      tool_calls: [{ id: `call_${crypto.randomUUID().slice(0, 8)}`, type: "function", function: { name, arguments: JSON.stringify(args) } }],
    });
    let message: Record<string, unknown>;
    if (isLead) {
      if (toolResults.length === 0) message = call("task", { description: "write the file", prompt: `Write ${PATH}.`, subagent_type: "general-purpose" });
      else if (toolResults.length === 1) message = call("read_file", { description: "read it", path: PATH });
      else {
        seenByLead.push(String(toolResults.at(-1)!.content));
        message = { role: "assistant", content: "The subagent's file is there." };
      }
    } else {
      message = toolResults.length === 0 ? call("write_file", { description: "write", path: PATH, content: CONTENT }) : { role: "assistant", content: "Wrote it." };
    }
    return c.json(scriptedCompletion(message));
  });
  return app;
}

const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

describe(`a delegated subagent's files on the lead thread (${runtime})`, () => {
  it(`"delegated subagents ... are non-owners": the lead reads what its subagent wrote, and it is still there after a restart (${runtime})`, async () => {
    const dir = await mkdtemp(join(tmpdir(), "deerflow-subagent-files-"));
    dirs.push(dir);
    const seenByLead: string[] = [];
    const model = await serve(scriptedModel(seenByLead).fetch, { hostname: "127.0.0.1", port: 0 });
    const config = scriptedModelConfig(model.url, { sandbox: { lazy_init: false } }, "subagent-files");
    const start = () => createGateway({ config, storage: createFsKeyValue(dir), env: scriptedModelEnv(), listening: { host: "127.0.0.1" } });
    try {
      const first = await start();
      const post = (path: string, body: unknown) =>
        first.fetch(new Request(`http://127.0.0.1${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) }));
      const { thread_id: threadId } = (await (await post("/api/threads", {})).json()) as { thread_id: string };
      const run = await post(`/api/threads/${threadId}/runs/wait`, {
        input: { messages: [{ type: "human", content: "Delegate writing the file, then read it." }] },
        context: { subagent_enabled: true },
      });
      expect(run.status, await run.clone().text()).toBe(200);
      expect(seenByLead).toHaveLength(1);
      expect(seenByLead[0]).toContain(CONTENT);
      await first.shutdown();

      const second = await start();
      const artifact = await second.fetch(new Request(`http://127.0.0.1/api/threads/${threadId}/artifacts${PATH}`));
      expect(artifact.status).toBe(200);
      expect(await artifact.text()).toBe(CONTENT);
      await second.shutdown();
    } finally {
      await model.close();
    }
  });
});

/** The lead delegates once, then answers; the subagent lists the same folder three times, then answers. */
function loopingSubagentModel(): Hono {
  const app = new Hono();
  app.post("/v1/chat/completions", async (c) => {
    const body = (await c.req.json()) as Body;
    const isLead = (body.tools ?? []).some((tool) => tool.function.name === "task");
    const toolResults = body.messages.filter((m) => m.role === "tool").length;
    const call = (name: string, args: Record<string, unknown>) => ({
      role: "assistant",
      content: null,
      tool_calls: [{ id: `call_${crypto.randomUUID().slice(0, 8)}`, type: "function", function: { name, arguments: JSON.stringify(args) } }],
    });
    const message = isLead
      ? toolResults === 0
        ? call("task", { description: "look around", prompt: "List the workspace.", subagent_type: "general-purpose" })
        : { role: "assistant", content: "Done." }
      : toolResults < 3
        ? call("ls", { description: "list", path: "/mnt/user-data/workspace" })
        : { role: "assistant", content: "Listed." };
    return c.json(scriptedCompletion(message));
  });
  return app;
}

describe(`a delegated subagent's loop detection in the lead run's journal (${runtime})`, () => {
  // Spec (middleware-chain.md #28): "persists warned-state transitions ... as middleware:loop_detection, attributed with
  // is_subagent ... Ordinary task-tool subagents receive a loop-detection-only recorder proxy that forwards the append to the parent run loop".
  it(`"forwards the append to the parent run loop": the subagent's LoopDetection warning is a journal event of the lead run (${runtime})`, async () => {
    const model = await serve(loopingSubagentModel().fetch, { hostname: "127.0.0.1", port: 0 });
    const config = scriptedModelConfig(model.url, { loop_detection: { warn_threshold: 2, hard_limit: 5 } }, "subagent-loop-journal");
    const gateway = await createGateway({ config, storage: createMemoryKeyValue(), env: scriptedModelEnv(), listening: { host: "127.0.0.1" } });
    try {
      const call = (method: string, path: string, body?: unknown) =>
        gateway.fetch(new Request(`http://127.0.0.1${path}`, { method, headers: { "content-type": "application/json" }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) }));
      const { thread_id: threadId } = (await (await call("POST", "/api/threads", {})).json()) as { thread_id: string };
      const run = await call("POST", `/api/threads/${threadId}/runs/wait`, {
        input: { messages: [{ type: "human", content: "Delegate a look around." }] },
        context: { subagent_enabled: true },
      });
      expect(run.status, await run.clone().text()).toBe(200);
      const runs = (await (await call("GET", `/api/threads/${threadId}/runs`)).json()) as Array<{ run_id: string }>;
      expect(runs).toHaveLength(1);
      const runId = runs[0]!.run_id;
      const events = (await (await call("GET", `/api/threads/${threadId}/runs/${runId}/events?event_types=middleware:loop_detection`)).json()) as Array<{ content: Record<string, unknown> }>;
      expect(events.map((event) => event.content)).toEqual([expect.objectContaining({ action: "warn", is_subagent: true, tool_names: ["ls"] })]);
      await gateway.shutdown();
    } finally {
      await model.close();
    }
  });
});
