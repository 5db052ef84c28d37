// The example extension, loaded through the real loader, in the real lead chain.
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { HumanMessage } from "@langchain/core/messages";
import { createModuleLoader } from "../../../adapters/shared/module-loader.ts";
import { validateLeadConfig } from "../../../src/agents/app-config.ts";
import { assembleLeadAgent } from "../../../src/agents/lead-agent.ts";
import { systemClock } from "../../../src/core/clock.ts";
import { mapEnv } from "../../../src/core/env.ts";
import { EXTENSION_TASK_STORE_KEY, ExtensionData, taskInfo } from "../../../src/extension-api/index.ts";
import { loadExtensions } from "../../../src/extensions/loader.ts";
import { notifyTaskStart, notifyTaskStop } from "../../../src/extensions/notify.ts";
import { createVirtualSandboxProvider } from "../../../src/sandbox/virtual.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";

const EXAMPLE = fileURLToPath(new URL("../../../examples/deerflow-extension-example/src/index.ts", import.meta.url));

async function events(extensions: Awaited<ReturnType<typeof loadExtensions>>["extensions"]) {
  const route = extensions.routers.flatMap((r) => r.value).find((route) => route.path === "/example/events")!;
  const response = await route.handler(new Request("http://host/example/events"), {
    principal: { userId: "admin", isAdmin: true, isInternal: false, roles: ["admin"] },
  });
  return ((await response.json()) as { events: Array<Record<string, unknown>> }).events;
}

describe("lead agent with a loaded extension", () => {
  it("composes the contributed middleware at its anchor, isolated and attributed, and tells every observer", async () => {
    const config = validateLeadConfig(
      { plugins: [{ name: "example", use: `${EXAMPLE}:install` }], title: { model_name: "demo" } },
      "config.yaml",
    );
    const { extensions, diagnostics } = await loadExtensions(config.plugins, createModuleLoader());
    expect(diagnostics).toEqual([]);
    const storage = createMemoryKeyValue();
    const assembly = await assembleLeadAgent({
      config,
      extensions,
      services: { clock: systemClock, storage, sandbox: createVirtualSandboxProvider({ storage }) },
      env: mapEnv({}),
    });
    const names = assembly.agent.middlewares.map((m) => m.name);
    const contributed = names.findIndex((n) => n.startsWith("extension_"));
    expect(contributed).toBeGreaterThan(-1);
    // MODEL_PHYSICAL: inner of SafetyFinishReason, with Clarification still last.
    expect(names[contributed - 1]).toBe("SafetyFinishReason");
    expect(names.at(-1)).toBe("Clarification");
    const described = assembly.descriptor.middlewares[contributed]!;
    expect(described.extension).toBe(`${EXAMPLE}:install`);
    expect(assembly.diagnostics).toEqual([]);

    const runId = "run-ext-1";
    const taskStore = new ExtensionData(runId);
    const info = taskInfo({ taskId: runId, runId, threadId: "t-ext", kind: "lead" });
    await notifyTaskStart(extensions.taskLifecycle, extensions.appStore, taskStore, info, {});
    await assembly.agent.invoke(
      { messages: [new HumanMessage("Write a note about plugins.")] },
      { threadId: "t-ext", runId, context: { [EXTENSION_TASK_STORE_KEY]: taskStore } },
    );
    await notifyTaskStop(extensions.taskLifecycle, extensions.appStore, taskStore, info, "completed", {});

    const seen = await events(extensions);
    expect(seen.find((e) => e.type === "agent_assembled")).toMatchObject({ agentName: "lead-agent" });
    expect(seen.find((e) => e.type === "task_start")).toMatchObject({ taskId: runId, kind: "lead" });
    // The demo session makes three model calls; the contributed middleware counted every one.
    expect(seen.find((e) => e.type === "task_stop")).toMatchObject({ outcome: "completed", modelCalls: 3 });
    // The title model call is the host's own, outside the chain: the system-model observer saw it.
    expect(seen.find((e) => e.type === "system_model_call")).toMatchObject({ kind: "title", ok: true, messages: 1 });
  });

  it("reports the summarization's compaction and its model call to the extension", async () => {
    const config = validateLeadConfig(
      {
        plugins: [{ use: `${EXAMPLE}:install` }],
        summarization: { enabled: true, trigger: { messages: 4 }, keep: { messages: 2 } },
      },
      "config.yaml",
    );
    const { extensions } = await loadExtensions(config.plugins, createModuleLoader());
    const storage = createMemoryKeyValue();
    const assembly = await assembleLeadAgent({
      config,
      extensions,
      services: { clock: systemClock, storage, sandbox: createVirtualSandboxProvider({ storage }) },
      env: mapEnv({}),
    });
    const live = new ExtensionData("run-compact");
    await assembly.agent.invoke(
      { messages: [new HumanMessage("Write a note about compaction.")] },
      { threadId: "t-compact", runId: "run-compact", context: { [EXTENSION_TASK_STORE_KEY]: live } },
    );
    await new Promise((resolve) => setTimeout(resolve, 0)); // compaction observers are told after the call returns
    const seen = await events(extensions);
    expect(seen.find((e) => e.type === "system_model_call")).toMatchObject({ kind: "summarization", ok: true });
    // "There is no live task to attach at that call site, so observers receive a detached task store".
    expect(seen.find((e) => e.type === "context_compacted")).toMatchObject({ compacted: expect.any(Number), kept: expect.any(Number), scope: "detached" });
    expect(assembly.diagnostics).toEqual([]);
  });

  it("changes the fingerprint when an extension contributes, and names the extension", async () => {
    const storage = createMemoryKeyValue();
    const services = { clock: systemClock, storage, sandbox: createVirtualSandboxProvider({ storage }) };
    const config = validateLeadConfig({ plugins: [{ use: `${EXAMPLE}:install` }] }, "config.yaml");
    const { extensions } = await loadExtensions(config.plugins, createModuleLoader());
    const bare = await assembleLeadAgent({ config: validateLeadConfig({}, "c"), services, env: mapEnv({}) });
    const withExtension = await assembleLeadAgent({ config, extensions, services, env: mapEnv({}) });
    expect(withExtension.fingerprint).not.toBe(bare.fingerprint);
  });
});
