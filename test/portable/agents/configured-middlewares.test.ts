import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { createModuleLoader } from "../../../adapters/shared/module-loader.ts";
import {
  EXTENSION_MIDDLEWARE_INVALID,
  ExtensionMiddlewareError,
  LEAD_EXTENSION_TAIL,
  SUBAGENT_EXTENSION_TAIL,
  loadConfiguredMiddlewareSources,
  loadConfiguredMiddlewares,
  middlewareProblem,
  placeExtensionMiddlewares,
} from "../../../src/agents/configured-middlewares.ts";
import { systemClock } from "../../../src/core/clock.ts";
import { createAgent } from "../../../src/engine/agent.ts";
import type { AgentMiddleware, AgentTool } from "../../../src/engine/types.ts";
import { ModuleLoaderError, type ModuleLoader } from "../../../src/ports/index.ts";
import { AuditMiddleware } from "../../fixtures/extensions/valid-middleware.ts";

const fixtures = fileURLToPath(new URL("../../fixtures/extensions/", import.meta.url));
const realLoader = createModuleLoader({ baseDir: fixtures });

/** A loader over in-memory modules, so each failure mode is one line of setup. */
function memoryLoader(modules: Record<string, Record<string, unknown>>): ModuleLoader & { loaded: string[] } {
  const loaded: string[] = [];
  return {
    loaded,
    async load(specifier) {
      loaded.push(specifier);
      const namespace = modules[specifier];
      if (!namespace) throw new ModuleLoaderError("module_not_found", `Could not load module "${specifier}": not there.`);
      return namespace;
    },
  };
}

async function failure(entries: string[], loader: ModuleLoader = realLoader): Promise<ExtensionMiddlewareError> {
  const error = await loadConfiguredMiddlewares(entries, loader).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ExtensionMiddlewareError);
  const typed = error as ExtensionMiddlewareError;
  expect(typed.code).toBe(EXTENSION_MIDDLEWARE_INVALID);
  return typed;
}

/** Named stand-ins for built-ins: placement only looks at names. */
const stubs = (...names: string[]): AgentMiddleware[] => names.map((name) => ({ name }));

describe("loadConfiguredMiddlewares", () => {
  it("builds a zero-argument class with new, and a zero-argument (sync or async) factory by calling it", async () => {
    const built = await loadConfiguredMiddlewares(
      ["./valid-middleware.ts:AuditMiddleware", "./valid-middleware.ts:createTaggingMiddleware", "./valid-middleware.ts:createAsyncMiddleware"],
      realLoader,
    );
    expect(built.map((m) => m.name)).toEqual(["Audit", "Tagging", "AsyncBuilt"]);
    expect(built[0]).toBeInstanceOf(AuditMiddleware);
    // A fresh instance per load: per-instance state is never shared between agents.
    const again = await loadConfiguredMiddlewares(["./valid-middleware.ts:AuditMiddleware"], realLoader);
    expect(again[0]).not.toBe(built[0]);
  });

  it("accepts the default export by name and returns nothing for no entries", async () => {
    expect((await loadConfiguredMiddlewares(["./valid-middleware.ts:default"], realLoader))[0]?.name).toBe("Audit");
    expect(await loadConfiguredMiddlewares([], realLoader)).toEqual([]);
  });

  it("scenario M60: a missing module fails loudly, naming the entry and how to fix it", async () => {
    const error = await failure(["pkg.mod:Missing"]);
    expect(error.problem).toBe("module_not_found");
    expect(error.entry).toBe("pkg.mod:Missing");
    expect(error.message).toMatch(/^extensions\.middlewares\[0\] "pkg\.mod:Missing": Could not load module "pkg\.mod"/);
    expect(error.message).toContain("npm install pkg.mod");
    expect(error.cause).toBeInstanceOf(ModuleLoaderError);
  });

  it("scenario M60: a class that is not a middleware fails loudly", async () => {
    const error = await failure(["./not-middleware.ts:PlainService"]);
    expect(error.problem).toBe("not_middleware");
    expect(error.message).toBe(
      'extensions.middlewares[0] "./not-middleware.ts:PlainService" is not an agent middleware: its name is missing; ' +
        'give it a readonly `name` matching /^[A-Za-z0-9_.-]+$/ (e.g. "Audit").',
    );
  });

  it("fails on a missing export, listing what the module does export", async () => {
    const error = await failure(["./not-middleware.ts:Nope"]);
    expect(error.problem).toBe("missing_export");
    expect(error.message).toBe(
      'extensions.middlewares[0] "./not-middleware.ts:Nope": module "./not-middleware.ts" has no export "Nope" ' +
        "(it exports PlainService, settings, sharedInstance). Fix the name after the colon.",
    );
  });

  it("never takes an inherited member for an export", async () => {
    const error = await failure(["mod:constructor"], memoryLoader({ mod: {} }));
    expect(error.problem).toBe("missing_export");
    expect(error.message).toContain("it has no exports");
  });

  it.each([
    ["pkg.mod", "no colon"],
    [":Audit", "no module"],
    ["./x.ts:", "no export"],
    ["./x.ts:not-an-identifier", "a bad export name"],
    ["C:\\middlewares\\audit.ts", "a Windows path without export"],
  ])("rejects the malformed entry %j (%s) before loading anything", async (entry) => {
    const loader = memoryLoader({});
    const error = await failure([entry], loader);
    expect(error.problem).toBe("bad_entry");
    expect(error.message).toContain('expected "module:ExportName", e.g. ./middlewares/audit.ts:AuditMiddleware');
    expect(loader.loaded).toEqual([]);
  });

  it("splits at the last colon, so Windows drives and npm: specifiers keep their module part", async () => {
    const loader = memoryLoader({ "C:\\m\\audit.ts": { Audit: AuditMiddleware }, "npm:@acme/guard": { Audit: AuditMiddleware } });
    await loadConfiguredMiddlewares(["C:\\m\\audit.ts:Audit"], loader);
    await expect(loadConfiguredMiddlewares(["npm:@acme/guard:Audit"], loader)).resolves.toHaveLength(1);
    expect(loader.loaded).toEqual(["C:\\m\\audit.ts", "npm:@acme/guard"]);
  });

  it("rejects exports that are not a class or factory, and says to export the class rather than a shared instance", async () => {
    const settings = await failure(["./not-middleware.ts:settings"]);
    expect(settings.problem).toBe("not_constructible");
    expect(settings.message).toContain("the export is an object (Object), not a class or factory");
    const instance = await failure(["./not-middleware.ts:sharedInstance"]);
    expect(instance.message).toContain("Export the class (or a factory) instead of an instance");
  });

  it("rejects a constructor that needs arguments", async () => {
    const error = await failure(["./valid-middleware.ts:ParameterisedMiddleware"]);
    expect(error.problem).toBe("needs_arguments");
    expect(error.message).toContain("the class takes 1 argument(s), but configured middlewares are built with none");
  });

  it("fails loudly when the constructor throws, keeping the cause", async () => {
    const error = await failure(["./throwing-constructor.ts:ExplodingMiddleware"]);
    expect(error.problem).toBe("constructor_failed");
    expect(error.message).toBe(
      'extensions.middlewares[0] "./throwing-constructor.ts:ExplodingMiddleware": building the middleware failed: ' +
        "configured middleware init failed: AUDIT_ENDPOINT is not set. Fix the class; the agent is not created without it.",
    );
    expect((error.cause as Error).message).toContain("AUDIT_ENDPOINT");
  });

  it("fails when a factory throws or rejects", async () => {
    const loader = memoryLoader({
      mod: {
        sync: () => {
          throw new Error("no token");
        },
        async: async () => Promise.reject(new Error("no network")),
      },
    });
    expect((await failure(["mod:sync"], loader)).message).toContain("building the middleware failed: no token. Fix the factory");
    expect((await failure(["mod:async"], loader)).message).toContain("no network");
  });

  it("rejects a result with a bad hook, a bad name or bad tools", async () => {
    expect((await failure(["./valid-middleware.ts:BadHookMiddleware"])).message).toContain(
      'afterModel is a string; it must be a function or { hook, canJumpTo } with targets from model, tools, end',
    );
    const loader = memoryLoader({
      mod: {
        spaced: () => ({ name: "has space" }),
        jumpy: () => ({ name: "Jumpy", afterModel: { hook: () => undefined, canJumpTo: ["elsewhere"] } }),
        tooly: () => ({ name: "Tooly", tools: [{ name: "t" }] }),
        wrapper: () => ({ name: "Wrapper", wrapToolCall: "yes" }),
        nothing: () => undefined,
      },
    });
    expect((await failure(["mod:spaced"], loader)).message).toContain('its name is "has space"');
    expect((await failure(["mod:jumpy"], loader)).message).toContain("afterModel is an object");
    expect((await failure(["mod:tooly"], loader)).message).toContain("tools[0] is not a tool");
    expect((await failure(["mod:wrapper"], loader)).message).toContain("wrapToolCall is a string, not a function");
    expect((await failure(["mod:nothing"], loader)).message).toContain("it produced undefined, not a middleware object");
  });

  it("rejects two entries that build middlewares of the same name, naming both", async () => {
    const error = await failure(["./valid-middleware.ts:AuditMiddleware", "./valid-middleware.ts:default"]);
    expect(error.problem).toBe("duplicate_name");
    expect(error.message).toContain('its name "Audit" is already taken by "./valid-middleware.ts:AuditMiddleware"');
  });

  it("reports a module that fails while loading as module_load_failed, and names the config source", async () => {
    const error = (await loadConfiguredMiddlewares(["./throwing-module.mjs:X"], realLoader, { source: "config.yaml: extensions.middlewares" }).catch(
      (e: unknown) => e,
    )) as ExtensionMiddlewareError;
    expect(error).toBeInstanceOf(ExtensionMiddlewareError);
    expect(error.problem).toBe("module_load_failed");
    expect(error.message).toMatch(/^config\.yaml: extensions\.middlewares\[0\] "\.\/throwing-module\.mjs:X": Module/);
  });

  it('"set in config.yaml or extensions_config.json": one chain, config.yaml\'s entries first, an entry both name loaded once, a name clash across files refused', async () => {
    const loader = memoryLoader({ a: { A: () => ({ name: "A" }) }, b: { B: () => ({ name: "B" }), Other: () => ({ name: "A" }) } });
    const sources = (fromFile: string[]) => [
      { source: "config.yaml: extensions.middlewares", entries: ["a:A"] },
      { source: "extensions_config.json: extensions.middlewares", entries: fromFile },
    ];
    expect((await loadConfiguredMiddlewareSources(sources(["b:B", "a:A"]), loader)).map((m) => m.name)).toEqual(["A", "B"]);
    const error = (await loadConfiguredMiddlewareSources(sources(["b:Other"]), loader).catch((e: unknown) => e)) as ExtensionMiddlewareError;
    expect(error).toBeInstanceOf(ExtensionMiddlewareError);
    expect(error.problem).toBe("duplicate_name");
    expect(error.message).toMatch(/^extensions_config\.json: extensions\.middlewares\[0\] "b:Other": its name "A" is already taken by "a:A"/);
    // Within one file a repeated entry is still the duplicate it always was.
    expect(((await loadConfiguredMiddlewareSources([{ source: "config.yaml", entries: ["a:A", "a:A"] }], loader).catch((e: unknown) => e)) as ExtensionMiddlewareError).problem).toBe("duplicate_name");
  });

  it("stops at the first broken entry: no later module is loaded", async () => {
    const loader = memoryLoader({ ok: { A: () => ({ name: "A" }) } });
    await failure(["ok:A", "missing:B", "ok:A"], loader);
    expect(loader.loaded).toEqual(["ok", "missing"]);
  });

  it("rethrows a cancelled build's own error instead of blaming the entry", async () => {
    const controller = new AbortController();
    const abort = new DOMException("build cancelled", "AbortError");
    const loader: ModuleLoader = {
      async load() {
        controller.abort(abort);
        throw abort;
      },
    };
    await expect(loadConfiguredMiddlewares(["mod:A"], loader, { signal: controller.signal })).rejects.toBe(abort);
  });

  it("accepts a middleware whose hooks are { hook, canJumpTo } specs and whose tools are complete", () => {
    const tool: AgentTool = { name: "t", description: "d", schema: { type: "object" }, invoke: async () => "x" };
    expect(middlewareProblem({ name: "Ok.v2_x-y", afterModel: { hook: () => undefined, canJumpTo: ["model", "end"] }, tools: [tool] })).toBeNull();
  });
});

describe("placement of custom and configured middlewares", () => {
  const leadDefault = [
    "InputSanitization", "ToolOutputBudget", "ToolResultSanitization", "ThreadData", "Uploads", "Sandbox", "DanglingToolCall",
    "LLMErrorHandling", "SandboxAudit", "ReadBeforeWrite", "ToolErrorHandling", "DynamicContext", "SkillActivation",
    "SkillToolPolicy", "DurableContext", "TokenUsage", "Title", "Memory", "SystemMessageCoalescing", "LoopDetection",
    "TokenBudget", "TerminalResponse", "ModelLengthFinishReason", "SafetyFinishReason", "Clarification",
  ];

  it("scenario M60: in the lead chain they sit after the loop/token guards and before the terminal/safety/clarification tail, custom first", async () => {
    const configured = await loadConfiguredMiddlewares(["./valid-middleware.ts:AuditMiddleware", "./valid-middleware.ts:createTaggingMiddleware"], realLoader);
    const chain = placeExtensionMiddlewares(stubs(...leadDefault), { custom: stubs("Manual"), configured }, LEAD_EXTENSION_TAIL);
    expect(chain.map((m) => m.name).slice(-10)).toEqual([
      "SystemMessageCoalescing", "LoopDetection", "TokenBudget",
      "Manual", "Audit", "Tagging",
      "TerminalResponse", "ModelLengthFinishReason", "SafetyFinishReason", "Clarification",
    ]);
    expect(chain).toHaveLength(leadDefault.length + 3);
  });

  it("scenario M60: in the subagent chain they sit after the guards and before safety and the context tail", async () => {
    const configured = await loadConfiguredMiddlewares(["./valid-middleware.ts:AuditMiddleware"], realLoader);
    const subagent = stubs(
      "InputSanitization", "ThreadData", "Sandbox", "DanglingToolCall", "LLMErrorHandling", "SandboxAudit", "ToolErrorHandling",
      "SkillActivation", "SkillToolPolicy", "LoopDetection", "TokenBudget", "SafetyFinishReason", "DurableContext",
      "Summarization", "SubagentDateContext", "SystemMessageCoalescing",
    );
    const names = placeExtensionMiddlewares(subagent, { configured }, SUBAGENT_EXTENSION_TAIL).map((m) => m.name);
    expect(names.slice(9, 13)).toEqual(["LoopDetection", "TokenBudget", "Audit", "SafetyFinishReason"]);
    // Safety switched off: still before the context middlewares that must stay innermost.
    const withoutSafety = subagent.filter((m) => m.name !== "SafetyFinishReason");
    const names2 = placeExtensionMiddlewares(withoutSafety, { configured }, SUBAGENT_EXTENSION_TAIL).map((m) => m.name);
    expect(names2.slice(-5)).toEqual(["Audit", "DurableContext", "Summarization", "SubagentDateContext", "SystemMessageCoalescing"]);
  });

  it("appends at the end when no tail member is present, and changes nothing without extensions", () => {
    expect(placeExtensionMiddlewares(stubs("A", "B"), { configured: stubs("X") }, LEAD_EXTENSION_TAIL).map((m) => m.name)).toEqual(["A", "B", "X"]);
    expect(placeExtensionMiddlewares(stubs("A", "Clarification"), {}, LEAD_EXTENSION_TAIL).map((m) => m.name)).toEqual(["A", "Clarification"]);
  });

  it("scenario M60: a loaded class runs its hooks in the real engine", async () => {
    const [audit] = (await loadConfiguredMiddlewares(["./valid-middleware.ts:AuditMiddleware"], realLoader)) as [AuditMiddleware];
    const echo: AgentTool = { name: "echo", description: "echo", schema: { type: "object", properties: {} }, invoke: async () => "echoed" };
    const model = fakeModel().respondWithTools([{ name: "echo", args: {}, id: "c1" }]).respond(new AIMessage("done"));
    const agent = createAgent({ model, tools: [echo], middlewares: [audit], services: { clock: systemClock } });
    const state = await agent.invoke({ messages: [new HumanMessage("hi")] }, { threadId: "t1" });
    expect(state.messages.at(-1)?.content).toBe("done");
    expect(audit.seen).toEqual(["model:1", "tool:echo", "model:3"]);
  });
});
