// Keeps README's extension example true: the same middleware, run through the engine.
import { describe, expect, it } from "vitest";
import { AIMessage, HumanMessage, SystemMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { createAgent, systemClock, type AgentMiddleware } from "deerflow-edge";
import { ContentKind, provenanceKwargs, readProvenance } from "deerflow-edge/extension-api";

const policy = "Answer in British English.";

const spelling: AgentMiddleware = {
  name: "acme.spelling",
  async wrapModelCall(request, handler) {
    const note = new SystemMessage({
      content: policy,
      additional_kwargs: provenanceKwargs({ contentKind: ContentKind.MIDDLEWARE_INJECTION, producerKind: "acme.spelling" }),
    });
    return handler({ ...request, messages: [note, ...request.messages] });
  },
  releasePolicyParameters: () => ({ policy }),
};

describe("README: writing an extension", () => {
  it("injects a stamped note into the request only", async () => {
    const model = fakeModel().respond(new AIMessage("Colour noted."));
    const agent = createAgent({ model, middlewares: [spelling], services: { clock: systemClock } });
    const state = await agent.invoke({ messages: [new HumanMessage("hi")] });
    const sent = model.calls[0]!.messages;
    expect(sent[0]!.content).toBe(policy);
    expect(readProvenance(sent[0]!.additional_kwargs)).toMatchObject({ contentKind: "middleware_injection", producerKind: "acme.spelling" });
    expect(state.messages.map((m) => m.content)).toEqual(["hi", "Colour noted."]);
  });
});

describe("README: configuration", () => {
  it("documents a config.yaml that validates, key for key", async () => {
    const { readFile } = await import("node:fs/promises");
    const { parseLeadConfigText } = await import("../src/agents/app-config.ts");
    const readme = await readFile(new URL("../README.md", import.meta.url), "utf8");
    const block = /```yaml\n# config\.yaml\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(block).toBeDefined();
    const config = parseLeadConfigText(block!, "README.md");
    expect(config.loop_detection?.warn_threshold).toBe(3);
    expect(config.extensions.middlewares).toEqual(["./my-middlewares.ts:AuditMiddleware"]);
    expect(config.gateway).toMatchObject({ host: "127.0.0.1", port: 2026, auth: { mode: "disabled", token_expiry_days: 7 } });
    expect(config.subagents?.batch).toMatchObject({ enabled: false, max_running: 4 });
  });
});

describe("README: loading an extension", () => {
  it("documents a plugins block that validates", async () => {
    const { readFile } = await import("node:fs/promises");
    const { parseLeadConfigText } = await import("../src/agents/app-config.ts");
    const readme = await readFile(new URL("../README.md", import.meta.url), "utf8");
    const block = /```yaml\n(plugins:[\s\S]*?)```/.exec(readme)?.[1];
    expect(block).toBeDefined();
    const config = parseLeadConfigText(block!, "README.md");
    expect(config.plugins).toEqual([
      expect.objectContaining({ name: "acme", use: "./extensions/acme.ts:install", enabled: true, required: false, config: { level: "info" } }),
    ]);
  });
});

describe("README: Cloudflare Workers", () => {
  it("documents a DEERFLOW_CONFIG the Worker starts with: memory storage, the virtual sandbox, api_key auth", async () => {
    const { readFile } = await import("node:fs/promises");
    const { workerConfig } = await import("../adapters/workers/gateway.ts");
    const readme = await readFile(new URL("../README.md", import.meta.url), "utf8");
    const block = /```yaml\n\s*# DEERFLOW_CONFIG\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(block).toBeDefined();
    const config = workerConfig({ DEERFLOW_CONFIG: block!.replace(/^ {2}/gm, "") });
    expect(config.storage.driver).toBe("memory");
    expect(config.sandbox.use).toBe("virtual");
    expect(config.gateway).toMatchObject({ auth: { mode: "api_key", api_keys: [{ key_env: "DEERFLOW_API_KEY", user_id: "me" }] } });
    expect(config.models[0]).toMatchObject({ use: "openai-compatible", api_key_env: "OPENAI_API_KEY" });
  });
});
