import { describe, expect, it } from "vitest";
import type { AgentAssemblyDescriptor } from "../../../src/extension-api/index.ts";
import { acceptanceGateways, call, human } from "../../fixtures/plugins/gateway-harness.ts";
import { auth, admin, user, withBody, ENV, assemblyObservingLoader } from "./ui-callers.ts";

/*
 * Custom agents as DeerFlow's UI uses them (/api/agents: list, get, create, update, delete, name
 * check), through a real gateway with api_key auth, and a run with `context.agent_name` built from
 * the agent: its SOUL in the prompt, its tool groups limiting tools, its fingerprint moving when
 * it changes.
 */



const gatewayWith = acceptanceGateways(() => ({ env: ENV }));

async function agentsGateway(seen: AgentAssemblyDescriptor[] = []) {
  const { gateway } = await gatewayWith(
    { gateway: { auth }, plugins: [{ use: "./observer.ts:install" }] },
    { loader: assemblyObservingLoader(seen) },
  );
  return gateway;
}

const researcher = {
  name: "Researcher-1",
  description: "Digs through sources",
  model: "demo",
  tool_groups: ["web", "file:read"],
  soul: "You are meticulous and cite every source.",
};

describe("/api/agents", () => {
  it("creates, lists, gets, checks, updates and deletes an agent; the name is stored lowercased", async () => {
    const gateway = await agentsGateway();
    const created = await call(gateway, "POST", "/api/agents", withBody(admin, researcher));
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      name: "researcher-1",
      description: "Digs through sources",
      model: "demo",
      tool_groups: ["web", "file:read"],
      skills: null,
      model_settings: null,
      thinking_enabled: null,
      reasoning_effort: null,
      soul: "You are meticulous and cite every source.",
    });

    // Every signed-in user reads.
    const listed = await call(gateway, "GET", "/api/agents", user);
    expect(listed.status).toBe(200);
    expect(listed.body.agents.map((a: { name: string }) => a.name)).toEqual(["researcher-1"]);
    expect((await call(gateway, "GET", "/api/agents/Researcher-1", user)).body).toEqual(created.body);
    expect((await call(gateway, "GET", "/api/agents/check?name=RESEARCHER-1", user)).body).toEqual({ available: false, name: "researcher-1" });
    expect((await call(gateway, "GET", "/api/agents/check?name=writer", user)).body).toEqual({ available: true, name: "writer" });

    const updated = await call(gateway, "PUT", "/api/agents/researcher-1", withBody(admin, { soul: "Be brief.", model_settings: { temperature: 0.2 }, tool_groups: null }));
    expect(updated.status).toBe(200);
    expect(updated.body).toMatchObject({ description: "Digs through sources", soul: "Be brief.", model_settings: { temperature: 0.2 }, tool_groups: null, model: "demo" });
    // model_settings merge by sub-field; a null sub-field clears it.
    const merged = await call(gateway, "PUT", "/api/agents/researcher-1", withBody(admin, { model_settings: { max_tokens: 500 } }));
    expect(merged.body.model_settings).toEqual({ temperature: 0.2, max_tokens: 500 });
    const cleared = await call(gateway, "PUT", "/api/agents/researcher-1", withBody(admin, { model_settings: { temperature: null } }));
    expect(cleared.body.model_settings).toEqual({ max_tokens: 500 });

    expect((await call(gateway, "DELETE", "/api/agents/researcher-1", admin)).status).toBe(204);
    expect((await call(gateway, "GET", "/api/agents/researcher-1", user)).status).toBe(404);
    expect((await call(gateway, "GET", "/api/agents", user)).body).toEqual({ agents: [] });
  });

  it("answers 409 for a duplicate name (any case), 404 for an unknown agent", async () => {
    const gateway = await agentsGateway();
    expect((await call(gateway, "POST", "/api/agents", withBody(admin, { name: "writer" }))).status).toBe(201);
    const duplicate = await call(gateway, "POST", "/api/agents", withBody(admin, { name: "WRITER", soul: "other" }));
    expect(duplicate.status).toBe(409);
    expect(duplicate.body.detail).toContain("'writer' already exists");
    expect((await call(gateway, "GET", "/api/agents/writer", admin)).body.soul).toBe("");
    for (const [method, body] of [["GET", undefined], ["PUT", { soul: "x" }], ["DELETE", undefined]] as const) {
      const res = await call(gateway, method, "/api/agents/nobody", body === undefined ? admin : withBody(admin, body));
      expect(res.status, method).toBe(404);
      expect(res.body.detail).toBe("Agent 'nobody' not found");
    }
  });

  it("lets only an administrator write: a user's create, update and delete are 403 and change nothing", async () => {
    const gateway = await agentsGateway();
    expect((await call(gateway, "POST", "/api/agents", withBody(admin, { name: "writer", soul: "kept" }))).status).toBe(201);
    const attempts = [
      await call(gateway, "POST", "/api/agents", withBody(user, { name: "mine" })),
      await call(gateway, "PUT", "/api/agents/writer", withBody(user, { soul: "taken over" })),
      await call(gateway, "DELETE", "/api/agents/writer", user),
    ];
    for (const res of attempts) {
      expect(res.status).toBe(403);
      expect(res.body.detail).toContain("Only an administrator may change custom agents");
    }
    expect((await call(gateway, "GET", "/api/agents", user)).body.agents).toEqual([expect.objectContaining({ name: "writer", soul: "kept" })]);
  });

  it("refuses a bad body or name with 422 naming the field, and writes nothing", async () => {
    const gateway = await agentsGateway();
    const cases: [string, string, unknown, string][] = [
      ["POST", "/api/agents", { name: "bad name!" }, "name:"],
      ["POST", "/api/agents", { name: "../etc" }, "name:"],
      ["POST", "/api/agents", { description: "no name" }, "name:"],
      ["POST", "/api/agents", { name: "a", tool_groups: ["teleport"] }, "tool_groups.0: unknown tool group"],
      ["POST", "/api/agents", { name: "a", model: "gpt-9" }, 'model: unknown model "gpt-9"'],
      ["POST", "/api/agents", { name: "a", model_settings: { temperature: 5 } }, "model_settings.temperature"],
      ["POST", "/api/agents", { name: "a", model_settings: { top_p: 1 } }, "model_settings.top_p: unknown field"],
      ["POST", "/api/agents", { name: "a", reasoning_effort: "extreme" }, "reasoning_effort"],
      ["POST", "/api/agents", { name: "a", colour: "red" }, "colour: unknown field"],
      ["POST", "/api/agents", [], "expected a JSON object"],
      ["PUT", "/api/agents/a", { soul: 42 }, "soul"],
      ["PUT", "/api/agents/bad%20name", { soul: "x" }, "name:"],
    ];
    expect((await call(gateway, "POST", "/api/agents", withBody(admin, { name: "a" }))).status).toBe(201);
    for (const [method, path, body, field] of cases) {
      const res = await call(gateway, method, path, withBody(admin, body));
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(res.body.detail, JSON.stringify(body)).toContain(field);
    }
    const check = await call(gateway, "GET", "/api/agents/check?name=no%20spaces", user);
    expect(check.status).toBe(422);
    expect(check.body.detail).toContain("name:");
    expect((await call(gateway, "GET", "/api/agents", admin)).body.agents.map((a: { name: string }) => a.name)).toEqual(["a"]);
  });
});

async function runOn(gateway: Awaited<ReturnType<typeof agentsGateway>>, threadId: string, context: Record<string, unknown>) {
  await call(gateway, "POST", "/api/threads", withBody(user, { thread_id: threadId }));
  return call(gateway, "POST", `/api/threads/${threadId}/runs/wait`, withBody(user, { input: human("hello"), context }));
}

describe("a run with context.agent_name", () => {
  it("is assembled from the agent: its SOUL in the prompt, its tool groups limiting tools; an update moves the fingerprint", async () => {
    const seen: AgentAssemblyDescriptor[] = [];
    const gateway = await agentsGateway(seen);
    expect((await call(gateway, "POST", "/api/agents", withBody(admin, researcher))).status).toBe(201);

    expect((await runOn(gateway, "t-plain", {})).status).toBe(200);
    const plain = seen.at(-1)!;
    expect(plain.agent_name).toBe("lead-agent");

    expect((await runOn(gateway, "t-agent", { agent_name: "researcher-1" })).status).toBe(200);
    const first = seen.at(-1)!;
    expect(first.agent_name).toBe("researcher-1");
    expect(first.base_prompt_hash).not.toBe(plain.base_prompt_hash);
    const tools = first.tools.map((t) => t.name);
    expect(tools).toEqual(expect.arrayContaining(["ls", "read_file", "web_fetch"]));
    expect(tools).not.toContain("bash");
    expect(tools).not.toContain("write_file");
    expect(plain.tools.map((t) => t.name)).toEqual(expect.arrayContaining(["bash", "write_file"]));
    expect(first.effective_policies).toMatchObject({ custom_agent: { name: "researcher-1", tool_groups: ["web", "file:read"] } });
    // The default agent's descriptor carries no custom-agent entry.
    expect(plain.effective_policies).not.toHaveProperty("custom_agent");

    // The same agent again: the cached assembly, no new descriptor.
    const before = seen.length;
    expect((await runOn(gateway, "t-agent", { agent_name: "researcher-1" })).status).toBe(200);
    expect(seen.length).toBe(before);

    expect((await call(gateway, "PUT", "/api/agents/researcher-1", withBody(admin, { soul: "Answer in one line." }))).status).toBe(200);
    expect((await runOn(gateway, "t-agent", { agent_name: "researcher-1" })).status).toBe(200);
    const afterSoul = seen.at(-1)!;
    expect(seen.length).toBe(before + 1);
    expect(afterSoul.base_prompt_hash).not.toBe(first.base_prompt_hash);

    expect((await call(gateway, "PUT", "/api/agents/researcher-1", withBody(admin, { tool_groups: ["bash"] }))).status).toBe(200);
    expect((await runOn(gateway, "t-agent", { agent_name: "researcher-1" })).status).toBe(200);
    const afterTools = seen.at(-1)!;
    expect(afterTools.tools.map((t) => t.name)).toContain("bash");
    expect(afterTools.tools.map((t) => t.name)).not.toContain("read_file");
  });

  it("the SOUL reaches the model's system prompt", async () => {
    const gateway = await agentsGateway();
    expect((await call(gateway, "POST", "/api/agents", withBody(admin, { name: "poet", soul: "Always rhyme, SOUL-MARKER-7." }))).status).toBe(201);
    const { built } = await builtSystemPrompt(gateway, "poet");
    expect(built).toContain("SOUL-MARKER-7");
    expect(built).toContain('<agent name="poet">');
  });

  it("naming an unknown agent is a 400 naming it, before any run exists", async () => {
    const gateway = await agentsGateway();
    const res = await runOn(gateway, "t-missing", { agent_name: "ghost" });
    expect(res.status).toBe(400);
    expect(res.body.detail).toContain('context.agent_name "ghost" names no custom agent');
    expect((await call(gateway, "GET", "/api/threads/t-missing/runs", user)).body ?? []).toEqual([]);
    // The UI's bootstrap chat names an agent that does not exist yet: it runs as the default agent.
    expect((await runOn(gateway, "t-boot", { agent_name: "ghost", is_bootstrap: true })).status).toBe(200);
  });
});

/** The system prompt of the agent the gateway's own factory builds for this agent name. */
async function builtSystemPrompt(gateway: Awaited<ReturnType<typeof agentsGateway>>, agentName: string): Promise<{ built: string }> {
  const me = { id: "u1", systemRole: "user" as const, authSource: "api_key" as const, isInternal: false, permissions: new Set<never>() };
  const agent = await gateway.deps.agentFactory({ user: me, agentName });
  return { built: String(agent.systemMessage?.content ?? "") };
}
