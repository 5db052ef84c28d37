import { describe, expect, it } from "vitest";
import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { systemClock } from "../../src/core/clock.ts";
import { createAgent } from "../../src/engine/index.ts";
import { HostExtensionRegistry } from "../../src/extensions/registry.ts";
import { bindExtensionSnapshot, EXTENSION_SNAPSHOT_CONTEXT_KEY, resolveRunExtensions } from "../../src/extensions/run-context.ts";

function loaded() {
  const registry = new HostExtensionRegistry();
  registry.attributedTo("acme:install", (r) => r.taskLifecycle({ onTaskStart: () => undefined }));
  return registry.build();
}

describe("the extension snapshot in run context", () => {
  it("reaches code inside the run unchanged: the same snapshot object the host bound", async () => {
    const extensions = loaded();
    const seen: unknown[] = [];
    const agent = createAgent({
      model: fakeModel().respond(new AIMessage("ok")),
      services: { clock: systemClock },
      middlewares: [{ name: "reader", beforeModel: (_s, rt) => void seen.push(resolveRunExtensions(rt.context)) }],
    });
    await agent.invoke({ messages: [new HumanMessage("hi")] }, { context: { ...bindExtensionSnapshot(extensions) } });
    expect(seen).toEqual([extensions]);
    expect(seen[0]).toBe(extensions);
  });

  it("ignores a caller's look-alike under the same key", async () => {
    const extensions = loaded();
    expect(resolveRunExtensions({ [EXTENSION_SNAPSHOT_CONTEXT_KEY]: { extensions } })).toBeUndefined();
    expect(resolveRunExtensions({ [EXTENSION_SNAPSHOT_CONTEXT_KEY]: extensions })).toBeUndefined();
    expect(resolveRunExtensions({})).toBeUndefined();
  });

  // Spec (extension-system.md): task_tool reads the snapshot back "through resolve_run_extensions()
  // (type-checked — runtime context is caller-mergeable)" and "a caller-supplied value is never
  // authoritative". A forgery built from the host's own class passes instanceof; only the registry of
  // issued snapshots refuses it.
  it("refuses a forged snapshot of the host's own class that the host never issued", () => {
    const bound = bindExtensionSnapshot(loaded())[EXTENSION_SNAPSHOT_CONTEXT_KEY] as object;
    const SnapshotClass = bound.constructor as new (extensions: unknown) => object;
    const other = loaded();
    const forged = new SnapshotClass(other);
    expect(forged).toBeInstanceOf(SnapshotClass);
    expect(resolveRunExtensions({ [EXTENSION_SNAPSHOT_CONTEXT_KEY]: forged })).toBeUndefined();
    const grafted = Object.assign(Object.create(Object.getPrototypeOf(bound) as object) as object, { extensions: other });
    expect(resolveRunExtensions({ [EXTENSION_SNAPSHOT_CONTEXT_KEY]: grafted })).toBeUndefined();
    expect(resolveRunExtensions({ [EXTENSION_SNAPSHOT_CONTEXT_KEY]: bound })).not.toBeUndefined();
  });
});
