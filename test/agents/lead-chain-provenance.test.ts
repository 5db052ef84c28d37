// Provenance through the whole default lead chain: stamped exactly where the spec lists it, and
// never on the user's own message.
import { describe, expect, it } from "vitest";
import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { validateLeadConfig } from "../../src/agents/app-config.ts";
import { buildLeadMiddlewares } from "../../src/agents/lead-agent.ts";
import { ManualClock } from "../../src/core/clock.ts";
import { createAgent } from "../../src/engine/index.ts";
import { PROVENANCE_KEYS, readProvenance } from "../../src/extension-api/index.ts";
import { createMemoryStore } from "../../src/middlewares/memory/store.ts";
import { createSkillRegistry } from "../../src/skills/registry.ts";
import { createMemoryKeyValue } from "../../src/storage/key-value.ts";

function stamps(messages: readonly BaseMessage[]) {
  return messages.map((m) => ({ type: m.getType(), provenance: readProvenance(m.additional_kwargs) }));
}

describe("lead chain: message provenance", () => {
  it("stamps the date reminder and the coalesced system message, and never the user's message", async () => {
    const storage = createMemoryKeyValue();
    const clock = new ManualClock(Date.UTC(2026, 4, 8, 9));
    const memoryStore = createMemoryStore(storage, clock);
    const model = fakeModel().respond(new AIMessage("Hello!"));
    const agent = createAgent({
      model,
      systemPrompt: "You are DeerFlow.",
      services: { clock, storage },
      middlewares: buildLeadMiddlewares(validateLeadConfig({}, "test"), {
        model,
        skillRegistry: createSkillRegistry(storage),
        memoryStore,
      }),
    });
    const state = await agent.invoke({ messages: [new HumanMessage({ content: "hi", id: "m1" })] }, { threadId: "t-prov" });

    const reminder = state.messages.find((m) => m.id === "m1")!;
    expect(readProvenance(reminder.additional_kwargs)).toMatchObject({ contentKind: "middleware_injection", producerKind: "dynamic_context" });
    const user = state.messages.find((m) => m.getType() === "human")!;
    for (const key of PROVENANCE_KEYS) expect(user.additional_kwargs).not.toHaveProperty(key);

    const request = model.calls[0]!.messages as BaseMessage[];
    const sent = stamps(request);
    expect(sent[0]).toEqual({ type: "system", provenance: expect.objectContaining({ producerKind: "system_coalescing" }) });
    expect(sent.filter((s) => s.type === "system")).toHaveLength(1);
    const sentUser = request.find((m) => m.getType() === "human")!;
    expect(readProvenance(sentUser.additional_kwargs)).toBeNull();
    expect(String(sentUser.content)).toContain("--- BEGIN USER INPUT ---");
    await memoryStore.close();
  });
});
