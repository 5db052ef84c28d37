import { describe, expect, it } from "vitest";
import { validateLeadConfig } from "../../../src/agents/app-config.ts";
import type { AuthorizationProvider } from "../../../src/authz/index.ts";
import { systemClock } from "../../../src/core/clock.ts";
import { mapEnv } from "../../../src/core/env.ts";
import { HumanMessage } from "@langchain/core/messages";
import { DetachedObservations } from "../../../src/extensions/detached.ts";
import { HostExtensionRegistry } from "../../../src/extensions/registry.ts";
import { createLeadAgentFactory } from "../../../src/runtime/agent-factory.ts";
import { KeyValueCheckpointSaver } from "../../../src/runtime/kv-checkpointer.ts";
import { createVirtualSandboxProvider } from "../../../src/sandbox/virtual.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";

/** Lets a principal see `bash` only when its authz attributes put it in the `ops` group. */
const opsOnlyBash: AuthorizationProvider = {
  name: "ops-only-bash",
  authorize: () => ({ allowed: true, rule: "allow" }),
  filterResources: (principal, resource, names) => {
    if (resource !== "tool") return names;
    const groups = principal.attributes.groups;
    const ops = Array.isArray(groups) && groups.includes("ops");
    return names.filter((name) => name !== "bash" || ops);
  },
};

function factory() {
  const storage = createMemoryKeyValue();
  const config = validateLeadConfig({ authorization: { enabled: true } }, "test");
  return createLeadAgentFactory({
    config,
    services: { clock: systemClock, storage, sandbox: createVirtualSandboxProvider({ storage }) },
    env: mapEnv({}),
    checkpointer: new KeyValueCheckpointSaver({ storage }),
    authorizationProvider: opsOnlyBash,
  });
}

const toolNames = (agent: { tools: readonly { name: string }[] }) => agent.tools.map((tool) => tool.name);

describe("createLeadAgentFactory", () => {
  it("keys its cache by the whole principal as it was at call time: mutating the caller's object afterwards never serves a stale tool set", async () => {
    const build = factory();
    const groups: string[] = [];
    const user = { id: "u1", systemRole: "user", isInternal: false, authzAttributes: { groups } };
    const plain = await build({ user });
    expect(toolNames(plain)).not.toContain("bash");

    groups.push("ops");
    const ops = await build({ user });
    expect(ops).not.toBe(plain);
    expect(toolNames(ops)).toContain("bash");
    // The first agent was built from a copy: the caller's later edit did not reach it.
    expect(toolNames(plain)).not.toContain("bash");

    groups.pop();
    expect(await build({ user })).toBe(plain);
    // An equal principal in a fresh object is the same caller.
    expect(await build({ user: { id: "u1", systemRole: "user", isInternal: false, authzAttributes: { groups: [] } } })).toBe(plain);
    expect(build.size).toBe(2);

    // A mutation made while the build is still in flight does not reach it either.
    const pending = build({ user: { ...user, id: "u3" } });
    const late = { id: "u4", systemRole: "user", isInternal: false, authzAttributes: { groups: [] as string[] } };
    const racing = build({ user: late });
    late.authzAttributes.groups.push("ops");
    expect(toolNames(await racing)).not.toContain("bash");
    await pending;
    await build.close();
  });

  it("tells callers apart by every principal field and by the run's model and flags; concurrent calls share one build", async () => {
    const build = factory();
    const base = { id: "u1", systemRole: "user", isInternal: false };
    const [a, b] = await Promise.all([build({ user: base }), build({ user: { ...base } })]);
    expect(a).toBe(b);
    const variants = await Promise.all([
      build({ user: { ...base, id: "u2" } }),
      build({ user: { ...base, systemRole: "admin" } }),
      build({ user: { ...base, isInternal: true } }),
      build({ user: { ...base, oauthProvider: "github", oauthId: "42" } }),
      build({ user: base, planMode: true }),
      build({ user: base, modelName: "demo" }),
    ]);
    expect(new Set([a, ...variants]).size).toBe(7);
    expect(build.modelNames()).toContain("demo");
    await build.close();
  });
});

describe("createLeadAgentFactory and the host's detached observations", () => {
  it('"Shutdown stops accepting detached observations before the memory shutdown flush": the memory flush in close() after the gate closed is not observed', async () => {
    for (const gated of [false, true]) {
      const seen: string[] = [];
      const registry = new HostExtensionRegistry();
      registry.attributedTo("observer:install", (view) => view.systemModelObserver({ onSystemModelCall: (_app, _task, kind) => void seen.push(kind) }));
      const storage = createMemoryKeyValue();
      const detachedObservations = new DetachedObservations();
      const build = createLeadAgentFactory({
        config: validateLeadConfig({ memory: { model_name: "demo", debounce_seconds: 300 } }, "test"),
        services: { clock: systemClock, storage, sandbox: createVirtualSandboxProvider({ storage }) },
        env: mapEnv({}),
        checkpointer: new KeyValueCheckpointSaver({ storage }),
        extensions: registry.build(),
        detachedObservations,
      });
      const agent = await build({ user: { id: "u1", systemRole: "user", isInternal: false } });
      await agent.invoke({ messages: [new HumanMessage("I prefer Python for scripts.")] }, { threadId: "t-mem", runId: "r-mem", context: { user_id: "u1" } });
      expect(seen, `gated ${gated}`).not.toContain("memory");
      if (gated) await detachedObservations.close();
      await build.close();
      expect(seen.includes("memory"), `gated ${gated}`).toBe(!gated);
    }
  });
});
