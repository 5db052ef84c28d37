import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { createModuleLoader } from "../../../adapters/shared/module-loader.ts";
import type { AgentMiddleware, ModelRequest } from "../../../src/engine/types.ts";
import type { AgentAssemblyDescriptor } from "../../../src/extension-api/assembly.ts";
import { EMPTY_HOST_POLICY } from "../../../src/extension-api/policy.ts";
import { taskInfo } from "../../../src/extension-api/lifecycle.ts";
import { ExtensionPermissionError, type ExtensionRouteContext } from "../../../src/extension-api/principal.ts";
import { EXTENSION_TASK_STORE_KEY, ExtensionData } from "../../../src/extension-api/task-store.ts";
import { parsePlugins } from "../../../src/extensions/config.ts";
import { loadExtensions } from "../../../src/extensions/loader.ts";
import {
  notifyAgentAssembled,
  notifyContextCompacted,
  notifyTaskStart,
  notifyTaskStop,
  observeSystemModelCall,
  type NotifyDiagnostic,
} from "../../../src/extensions/notify.ts";
// Type-only: makes `tsc -p .` check the example (examples/ is outside tsconfig's include).
import type { ExampleEvent } from "../../../examples/deerflow-extension-example/src/index.ts";
import { extensionSessionFactory } from "../../../src/gateway/extension-services.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { versionedOver } from "../../../src/storage/versioned.ts";

const sessionFactory = extensionSessionFactory(versionedOver(createMemoryKeyValue()));

/*
 * The example extension, loaded the way an operator would load it: its package.json names the
 * entry point, config.yaml's plugins list points at it, the real loader imports it through the
 * real module-loader adapter. Each of its seven contributions is then driven through the host
 * code that runs that kind (notify, stack composition, the route handlers).
 */

const packageDir = fileURLToPath(new URL("../../../examples/deerflow-extension-example/", import.meta.url));
const packageJson = JSON.parse(readFileSync(resolve(packageDir, "package.json"), "utf8")) as {
  name: string;
  type: string;
  deerflow: { extension: string };
};

/** `./src/index.ts:install` in package.json → an absolute `use` for config.yaml. */
function useFromPackage(): string {
  const entry = packageJson.deerflow.extension;
  const colon = entry.lastIndexOf(":");
  return `${resolve(packageDir, entry.slice(0, colon))}:${entry.slice(colon + 1)}`;
}

async function loadExample(config: Record<string, unknown> = {}) {
  const use = useFromPackage();
  const plugins = parsePlugins([{ use, required: true, config }]);
  const result = await loadExtensions(plugins, createModuleLoader({ baseDir: dirname(packageDir) }));
  return { use, ...result };
}

function context(userId: string | null, isAdmin = false): ExtensionRouteContext {
  return { principal: userId === null ? null : { userId, isAdmin, isInternal: false, roles: isAdmin ? ["admin"] : ["user"] } };
}

async function events(extensions: Awaited<ReturnType<typeof loadExample>>["extensions"]): Promise<ExampleEvent[]> {
  const route = extensions.routers[0]!.value.find((r) => r.path === "/example/events")!;
  const response = await route.handler(new Request("http://gateway.test/example/events"), context("admin-1", true));
  expect(response.status).toBe(200);
  return ((await response.json()) as { events: ExampleEvent[] }).events;
}

describe("deerflow-extension-example", () => {
  it("follows the packaging convention: its own package.json, ESM, deerflow.extension naming the install export", () => {
    expect(packageJson.name).toBe("deerflow-extension-example");
    expect(packageJson.type).toBe("module");
    expect(packageJson.deerflow.extension).toBe("./src/index.ts:install");
  });

  it("imports nothing but the public contract", () => {
    const source = readFileSync(resolve(packageDir, "src/index.ts"), "utf8").replace(/\/\*[\s\S]*?\*\/|\/\/[^\n]*/g, "");
    const specifiers = [...source.matchAll(/\b(?:from|import)\s*["']([^"']+)["']/g)].map((match) => match[1]);
    expect(specifiers).toEqual(["../../../src/extension-api/index.ts"]);
  });

  it("loads through the real loader and registers exactly one contribution of each of the seven kinds, attributed to its use", async () => {
    const { use, extensions, diagnostics, loaded } = await loadExample();
    expect(diagnostics).toEqual([]);
    expect(loaded).toEqual([use]);
    const kinds = [
      extensions.middlewareContributors,
      extensions.taskLifecycle,
      extensions.systemModelObservers,
      extensions.agentAssemblyObservers,
      extensions.contextCompactionObservers,
      extensions.services,
      extensions.routers,
    ];
    for (const entries of kinds) {
      expect(entries).toHaveLength(1);
      expect(entries[0]!.source).toBe(use);
    }
    expect(extensions.routers[0]!.value.map((route) => `${route.method} ${route.path}`)).toEqual(["GET /example/ping", "GET /example/events"]);
    expect(extensions.needsTaskStore).toBe(true);
  });

  it("runs every contribution through the host: service, middleware, lifecycle, system call, assembly, compaction, routes", async () => {
    const { use, extensions } = await loadExample({ max_events: 50 });
    const { appStore } = extensions;
    const hostDiagnostics: NotifyDiagnostic[] = [];
    const onDiagnostic = (d: NotifyDiagnostic) => hostDiagnostics.push(d);

    // Service (gateway lifetime).
    const service = extensions.services[0]!.value;
    expect(service.name).toBe("example-recorder");
    await service.start({ appStore, policy: EMPTY_HOST_POLICY, sessionFactory });

    // Router: any signed-in user may ping; the service's state shows through.
    const ping = extensions.routers[0]!.value.find((route) => route.path === "/example/ping")!;
    const pong = await ping.handler(new Request("http://gateway.test/example/ping"), context("user-1"));
    expect(pong.status).toBe(200);
    expect(pong.headers.get("content-type")).toBe("application/json");
    expect(await pong.json()).toEqual({ ok: true, extension: "deerflow-extension-example", user: "user-1", serviceStarted: true, events: 1 });

    // Middleware contributor: asked at agent build; its middleware is AgentMiddleware-shaped.
    // (Composition and isolation are the stack's job, tested in stack/isolation tests; this drives the hook the host would.)
    const buildContext = { scope: "lead" as const, agentName: "lead_agent", modelName: "demo", policy: EMPTY_HOST_POLICY };
    const placements = extensions.middlewareContributors[0]!.value.contributeMiddlewares(appStore, buildContext);
    expect(placements.map(({ placement, scope }) => ({ placement, scope }))).toEqual([{ placement: "model_physical", scope: "both" }]);
    const counter = placements[0]!.middleware as AgentMiddleware;
    expect(counter.name).toMatch(/^[A-Za-z0-9_.-]+$/);
    expect(counter.name).toBe("example_model_call_counter");

    // Task lifecycle around two model calls: the stop hook reads what the middleware counted in the shared task store.
    const taskStore = new ExtensionData("run-7");
    const info = taskInfo({ taskId: "run-7", runId: "run-7", threadId: "thread-7", kind: "lead", agentName: "lead_agent" });
    await notifyTaskStart(extensions.taskLifecycle, appStore, taskStore, info, { onDiagnostic });
    const request = { runtime: { context: { [EXTENSION_TASK_STORE_KEY]: taskStore }, signal: undefined } } as unknown as ModelRequest;
    let providerCalls = 0;
    const handler = async () => {
      providerCalls += 1;
      return { content: `answer ${providerCalls}` } as never;
    };
    expect(await counter.wrapModelCall!(request, handler)).toEqual({ content: "answer 1" });
    expect(await counter.wrapModelCall!(request, handler)).toEqual({ content: "answer 2" });
    expect(providerCalls).toBe(2);
    await notifyTaskStop(extensions.taskLifecycle, appStore, taskStore, info, "completed", { onDiagnostic });

    // System model call (a title from one prompt string).
    const title = await observeSystemModelCall(extensions.systemModelObservers, "title", { messages: "Title this chat" }, async () => "A title", {
      appStore,
      taskStore,
      onDiagnostic,
    });
    expect(title).toBe("A title");

    // Agent assembly.
    const descriptor = {
      namespace: "deerflow",
      agent_name: "lead_agent",
      middlewares: [{ name: "example_model_call_counter", module: "extension", policy_parameters: null, extension: use }],
    } as unknown as AgentAssemblyDescriptor;
    notifyAgentAssembled(extensions.agentAssemblyObservers, descriptor, { onDiagnostic });

    // Context compaction (fire-and-forget; the test waits on the detached pass).
    const pending: Promise<void>[] = [];
    notifyContextCompacted(
      extensions.contextCompactionObservers,
      {
        transform_kind: "summarization",
        transform_version: 1,
        source_content_hashes: ["a".repeat(64)],
        summary_content_hash: "b".repeat(64),
        compacted_message_count: 12,
        kept_message_count: 4,
      },
      { onDiagnostic, detach: (p) => pending.push(p) },
    );
    await Promise.all(pending);

    await service.stop();

    expect(hostDiagnostics).toEqual([]);
    expect(await events(extensions)).toEqual([
      { type: "service", state: "started" },
      { type: "task_start", taskId: "run-7", kind: "lead", threadId: "thread-7" },
      { type: "task_stop", taskId: "run-7", outcome: "completed", modelCalls: 2 },
      { type: "system_model_call", kind: "title", ok: true, messages: 1, durationMs: expect.any(Number) },
      { type: "agent_assembled", agentName: "lead_agent", middlewares: ["example_model_call_counter"] },
      { type: "context_compacted", compacted: 12, kept: 4, scope: "detached" },
      { type: "service", state: "stopped" },
    ]);
  });

  it("refuses its routes to callers the contract says it must: no identity for ping, a non-admin for events", async () => {
    const { extensions } = await loadExample();
    const [ping, eventsRoute] = extensions.routers[0]!.value;
    expect(() => ping!.handler(new Request("http://gateway.test/example/ping"), context(null))).toThrow(ExtensionPermissionError);
    expect(() => eventsRoute!.handler(new Request("http://gateway.test/example/events"), context("user-1"))).toThrow(/not an administrator/);
  });

  it("keeps state per install and bounds it by config.max_events", async () => {
    const first = await loadExample({ max_events: 2 });
    const second = await loadExample();
    const service = first.extensions.services[0]!.value;
    await service.start({ appStore: first.extensions.appStore, policy: EMPTY_HOST_POLICY, sessionFactory });
    await service.stop();
    await service.start({ appStore: first.extensions.appStore, policy: EMPTY_HOST_POLICY, sessionFactory });
    expect(await events(first.extensions)).toEqual([
      { type: "service", state: "stopped" },
      { type: "service", state: "started" },
    ]);
    expect(await events(second.extensions)).toEqual([]);
  });
});
