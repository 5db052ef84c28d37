import { kindCounts } from "./kind-counts.ts";
import { describe, expect, it } from "vitest";
import { ExtensionData, type ExtensionRegistry } from "../../src/extension-api/index.ts";
import { EMPTY_EXTENSIONS, HostExtensionRegistry } from "../../src/extensions/registry.ts";

const contributor = () => ({ contributeMiddlewares: () => [] });
const route = { method: "GET" as const, path: "/api/ext/a", handler: () => new Response("a") };

function registerEveryKind(registry: ExtensionRegistry): void {
  registry.middlewares(contributor());
  registry.taskLifecycle({ onTaskStart: () => undefined });
  registry.systemModelObserver({ onSystemModelCall: () => undefined });
  registry.agentAssemblyObserver({ onAgentAssembled: () => undefined });
  registry.contextCompactionObserver({ onContextCompacted: () => undefined });
  registry.service({ name: "s", start: async () => undefined, stop: async () => undefined });
  registry.routers([route]);
}


describe("HostExtensionRegistry", () => {
  it("refuses a registration outside attributedTo", () => {
    const registry = new HostExtensionRegistry();
    expect(() => registry.middlewares(contributor())).toThrow(expect.objectContaining({ code: "extension_registration_unattributed" }));
    expect(kindCounts(registry.build())).toEqual([0, 0, 0, 0, 0, 0, 0]);
  });

  it("attributes every kind to the source, through the view and the registry alike", () => {
    const registry = new HostExtensionRegistry();
    registry.attributedTo("pkg:install", (view) => registerEveryKind(view));
    registry.attributedTo("other:install", () => registry.middlewares(contributor()));
    const loaded = registry.build();
    expect(kindCounts(loaded)).toEqual([2, 1, 1, 1, 1, 1, 1]);
    expect(loaded.middlewareContributors.map((entry) => entry.source)).toEqual(["pkg:install", "other:install"]);
    expect(loaded.routers[0]).toEqual({ source: "pkg:install", value: [route] });
  });

  it("closes the view once install returns, so late registrations are refused", () => {
    const registry = new HostExtensionRegistry();
    let kept: ExtensionRegistry | undefined;
    registry.attributedTo("leaky:install", (view) => {
      kept = view;
    });
    expect(() => kept?.middlewares(contributor())).toThrow(expect.objectContaining({ code: "extension_registration_closed" }));
    expect(registry.build().middlewareContributors).toHaveLength(0);
  });

  it("keeps an async install's attribution until its promise settles", async () => {
    const registry = new HostExtensionRegistry();
    await registry.attributedTo("async:install", async (view) => {
      await Promise.resolve();
      view.service({ name: "late-but-in-time", start: async () => undefined, stop: async () => undefined });
    });
    expect(registry.build().services.map((entry) => entry.source)).toEqual(["async:install"]);
    expect(() => registry.middlewares(contributor())).toThrow(expect.objectContaining({ code: "extension_registration_unattributed" }));
  });

  it("rolls back positionally across all seven lists", () => {
    const registry = new HostExtensionRegistry();
    registry.attributedTo("same:install", (view) => registerEveryKind(view));
    const mark = registry.mark();
    registry.attributedTo("same:install", (view) => {
      registerEveryKind(view);
      registerEveryKind(view);
    });
    expect(kindCounts(registry.build())).toEqual([3, 3, 3, 3, 3, 3, 3]);
    registry.rollbackTo(mark);
    // The first install shares the source, and survives: undo is by position, not by source.
    expect(kindCounts(registry.build())).toEqual([1, 1, 1, 1, 1, 1, 1]);
  });

  it.each([
    ["middlewares", (r: ExtensionRegistry) => r.middlewares({ contribute: () => [] } as never), /contributeMiddlewares/],
    ["taskLifecycle", (r: ExtensionRegistry) => r.taskLifecycle({}), /onTaskStart\(\) or onTaskStop\(\)/],
    ["taskLifecycle", (r: ExtensionRegistry) => r.taskLifecycle({ onTaskStop: "later" } as never), /onTaskStop is a string/],
    ["systemModelObserver", (r: ExtensionRegistry) => r.systemModelObserver(null as never), /onSystemModelCall/],
    ["agentAssemblyObserver", (r: ExtensionRegistry) => r.agentAssemblyObserver({} as never), /onAgentAssembled/],
    ["contextCompactionObserver", (r: ExtensionRegistry) => r.contextCompactionObserver({} as never), /onContextCompacted/],
    ["service", (r: ExtensionRegistry) => r.service({ name: "s", start: async () => undefined } as never), /stop\(\)/],
    ["service", (r: ExtensionRegistry) => r.service({ start: async () => undefined, stop: async () => undefined } as never), /name/],
    ["routers", (r: ExtensionRegistry) => r.routers([]), /no routes/],
    ["routers", (r: ExtensionRegistry) => r.routers([{ ...route, method: "FETCH" }] as never), /routes\[0\]\.method/],
    ["routers", (r: ExtensionRegistry) => r.routers([route, { ...route, path: "api/x" }]), /routes\[1\]\.path/],
    ["routers", (r: ExtensionRegistry) => r.routers([{ ...route, handler: undefined }] as never), /routes\[0\]\.handler/],
    ["routers", (r: ExtensionRegistry) => r.routers(Object.assign([route], { onStartup: async () => undefined })), /"onStartup".*ExtensionService/],
    ["routers", (r: ExtensionRegistry) => r.routers(Object.assign([route], { lifespan: {} })), /"lifespan"/],
  ])("rejects a malformed %s registration, naming the extension", (_kind, register, reason) => {
    const registry = new HostExtensionRegistry();
    let caught: unknown;
    try {
      registry.attributedTo("bad:install", (view) => register(view));
    } catch (error) {
      caught = error;
    }
    expect(caught).toMatchObject({ code: "extension_registration_invalid" });
    expect((caught as Error).message).toContain('extension "bad:install"');
    expect((caught as Error).message).toMatch(reason);
    expect(kindCounts(registry.build())).toEqual([0, 0, 0, 0, 0, 0, 0]);
  });

  it("builds a frozen snapshot with a fresh app store each time", () => {
    const registry = new HostExtensionRegistry();
    registry.attributedTo("a:install", (view) => view.middlewares(contributor()));
    const first = registry.build();
    registry.attributedTo("b:install", (view) => view.middlewares(contributor()));
    const second = registry.build();
    expect(first.middlewareContributors).toHaveLength(1);
    expect(second.middlewareContributors).toHaveLength(2);
    expect(Object.isFrozen(first)).toBe(true);
    expect(Object.isFrozen(first.middlewareContributors)).toBe(true);
    expect(Object.isFrozen(first.middlewareContributors[0])).toBe(true);
    expect(first.appStore).toBeInstanceOf(ExtensionData);
    expect(first.appStore.scopeId).toBe("app");
    expect(first.appStore).not.toBe(second.appStore);
  });

  it("freezes a registered router so the extension cannot edit it afterwards", () => {
    const registry = new HostExtensionRegistry();
    const routes = [{ ...route }];
    registry.attributedTo("r:install", (view) => view.routers(routes));
    routes.push({ ...route, path: "/api/ext/b" });
    routes[0]!.path = "/health";
    const [entry] = registry.build().routers;
    expect(entry?.value.map((r) => r.path)).toEqual(["/api/ext/a"]);
    expect(Object.isFrozen(entry?.value[0])).toBe(true);
  });

  it.each([
    ["middleware contributors", (r: ExtensionRegistry) => r.middlewares(contributor()), true],
    ["task lifecycle", (r: ExtensionRegistry) => r.taskLifecycle({ onTaskStop: () => undefined }), true],
    ["system model observers", (r: ExtensionRegistry) => r.systemModelObserver({ onSystemModelCall: () => undefined }), true],
    ["compaction observers", (r: ExtensionRegistry) => r.contextCompactionObserver({ onContextCompacted: () => undefined }), true],
    ["assembly observers", (r: ExtensionRegistry) => r.agentAssemblyObserver({ onAgentAssembled: () => undefined }), false],
    ["services", (r: ExtensionRegistry) => r.service({ name: "s", start: async () => undefined, stop: async () => undefined }), false],
    ["routers", (r: ExtensionRegistry) => r.routers([route]), false],
  ])("needsTaskStore with only %s is %s", (_kind, register, expected) => {
    const registry = new HostExtensionRegistry();
    registry.attributedTo("x:install", (view) => register(view));
    expect(registry.build().needsTaskStore).toBe(expected);
  });

  it("the empty set needs no task store and has nothing", () => {
    expect(EMPTY_EXTENSIONS.needsTaskStore).toBe(false);
    expect(kindCounts(EMPTY_EXTENSIONS)).toEqual([0, 0, 0, 0, 0, 0, 0]);
  });
});
