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
});
