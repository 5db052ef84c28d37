import { describe, expect, it } from "vitest";
import {
  ASSEMBLY_NAMESPACE,
  CanonicalJsonError,
  assemblyFingerprint,
  assemblyFingerprintInput,
} from "../../src/extension-api/index.ts";
import type { AgentAssemblyDescriptor, AssemblyMiddlewareDescriptor } from "../../src/extension-api/index.ts";

const bash = {
  name: "bash",
  description_hash: "b".repeat(64),
  schema_hash: "c".repeat(64),
  source: "builtin",
  mcp_server: null,
  mcp_transport: null,
};
const webSearch = {
  name: "web_search",
  description_hash: "d".repeat(64),
  schema_hash: "e".repeat(64),
  source: "mcp",
  mcp_server: "search",
  mcp_transport: "http",
};
const loopDetection: AssemblyMiddlewareDescriptor = {
  name: "LoopDetection",
  module: "deerflow-edge/middlewares/loop-detection",
  extension: null,
  policy_parameters: { warn_threshold: 3, hard_limit: 5 },
};
const auditTrail: AssemblyMiddlewareDescriptor = {
  name: "AuditTrail",
  module: "acme-audit/middleware",
  extension: "acme-audit",
  policy_parameters: null,
  probed: true,
};

const descriptor: AgentAssemblyDescriptor = {
  namespace: ASSEMBLY_NAMESPACE,
  agent_name: "lead-agent",
  requested_model: "gpt",
  effective_model: "gpt-demo",
  model_parameters: { provider: "openai", temperature: 0.5 },
  thinking_enabled: false,
  reasoning_effort: null,
  base_prompt_hash: "a".repeat(64),
  tools: [bash, webSearch],
  middlewares: [loopDetection, auditTrail],
  deferred_tool_names: ["mcp_a", "mcp_b"],
  enabled_skills: ["deep-research", "écrire"],
  effective_policies: { plan_mode: false, recursion_limit: 100 },
  build: { package_version: "0.1.0", image_digest: null, git_commit: "abc123" },
};

const baseline = await assemblyFingerprint(descriptor);

function variant(changes: Partial<AgentAssemblyDescriptor>): AgentAssemblyDescriptor {
  return { ...descriptor, ...changes };
}

describe("assemblyFingerprint", () => {
  it("matches the canonical hash computed independently in Python", () => {
    // python3: canonical_hash of the fingerprint input (tools sorted, middlewares as
    // {name, module, extension, policy_parameters}, sorted names), see canonical-hash.test.ts
    expect(baseline).toBe("7f1aae51bf57baa97c7c3dbc6e83494e72a7581f1a4384b25dcb7af24e7a9c9e");
  });

  it("ignores the order tools, deferred names and skills were assembled in", async () => {
    expect(
      await assemblyFingerprint(
        variant({
          tools: [webSearch, bash],
          deferred_tool_names: ["mcp_b", "mcp_a"],
          enabled_skills: ["écrire", "deep-research"],
        }),
      ),
    ).toBe(baseline);
  });

  it("ignores the order of two tools that share a name", async () => {
    const fromOtherServer = { ...webSearch, mcp_server: "other" };
    const one = await assemblyFingerprint(variant({ tools: [bash, webSearch, fromOtherServer] }));
    const two = await assemblyFingerprint(variant({ tools: [fromOtherServer, bash, webSearch] }));
    expect(one).toBe(two);
    expect(one).not.toBe(baseline);
  });

  it("changes when middlewares are reordered, since order decides what wraps what", async () => {
    expect(await assemblyFingerprint(variant({ middlewares: [auditTrail, loopDetection] }))).not.toBe(baseline);
  });

  it("does not change with the build or the requested model", async () => {
    expect(
      await assemblyFingerprint(
        variant({
          requested_model: "something-else",
          build: { package_version: "9.9.9", image_digest: "sha256:ff", git_commit: "def456" },
        }),
      ),
    ).toBe(baseline);
    expect(await assemblyFingerprint(variant({ requested_model: null }))).toBe(baseline);
  });

  it("does not change when only the probed marker changes", async () => {
    expect(await assemblyFingerprint(variant({ middlewares: [loopDetection, { ...auditTrail, probed: false }] }))).toBe(baseline);
  });

  const changes: ReadonlyArray<[string, Partial<AgentAssemblyDescriptor>]> = [
    ["a middleware's extension", { middlewares: [loopDetection, { ...auditTrail, extension: "acme-audit-fork" }] }],
    ["a host middleware becoming an extension's", { middlewares: [{ ...loopDetection, extension: "acme" }, auditTrail] }],
    ["a policy parameter", { middlewares: [{ ...loopDetection, policy_parameters: { warn_threshold: 4, hard_limit: 5 } }, auditTrail] }],
    ["a middleware's module", { middlewares: [{ ...loopDetection, module: "other" }, auditTrail] }],
    ["a removed middleware", { middlewares: [loopDetection] }],
    ["the effective model", { effective_model: "gpt-other" }],
    ["a model parameter", { model_parameters: { provider: "openai", temperature: 0.7 } }],
    ["thinking", { thinking_enabled: true }],
    ["the reasoning effort", { reasoning_effort: "high" }],
    ["the prompt", { base_prompt_hash: "f".repeat(64) }],
    ["the agent name", { agent_name: "researcher" }],
    ["a tool's schema", { tools: [bash, { ...webSearch, schema_hash: "0".repeat(64) }] }],
    ["a tool's MCP transport", { tools: [bash, { ...webSearch, mcp_transport: "stdio" }] }],
    ["an added tool", { tools: [bash, webSearch, { ...bash, name: "read_file" }] }],
    ["a deferred tool", { deferred_tool_names: ["mcp_a"] }],
    ["an enabled skill", { enabled_skills: ["deep-research"] }],
    ["an effective policy", { effective_policies: { plan_mode: true, recursion_limit: 100 } }],
  ];
  for (const [what, change] of changes) {
    it(`changes with ${what}`, async () => {
      expect(await assemblyFingerprint(variant(change))).not.toBe(baseline);
    });
  }

  it("leaves the descriptor's own arrays in their assembled order", async () => {
    const unsorted = variant({ tools: [webSearch, bash], enabled_skills: ["z", "a"] });
    await assemblyFingerprint(unsorted);
    expect(unsorted.tools.map((tool) => tool.name)).toEqual(["web_search", "bash"]);
    expect(unsorted.enabled_skills).toEqual(["z", "a"]);
  });

  it("fails with a canonical JSON error naming the bad field", async () => {
    const broken = variant({ model_parameters: { temperature: NaN } });
    await expect(assemblyFingerprint(broken)).rejects.toBeInstanceOf(CanonicalJsonError);
    await expect(assemblyFingerprint(broken)).rejects.toMatchObject({
      code: "non_finite_number",
      path: "$.model_parameters.temperature",
    });
  });
});

describe("assemblyFingerprintInput", () => {
  it("shows exactly what is hashed: no build, no requested model, no probed marker", () => {
    const input = assemblyFingerprintInput(descriptor);
    expect(Object.keys(input).sort()).toEqual([
      "agent_name",
      "base_prompt_hash",
      "deferred_tool_names",
      "effective_model",
      "effective_policies",
      "enabled_skills",
      "middlewares",
      "model_parameters",
      "namespace",
      "reasoning_effort",
      "thinking_enabled",
      "tools",
    ]);
    expect(input.middlewares).toEqual([
      { name: "LoopDetection", module: "deerflow-edge/middlewares/loop-detection", extension: null, policy_parameters: { warn_threshold: 3, hard_limit: 5 } },
      { name: "AuditTrail", module: "acme-audit/middleware", extension: "acme-audit", policy_parameters: null },
    ]);
  });

  it("sorts names by code point, as the Python host does", () => {
    const input = assemblyFingerprintInput(variant({ enabled_skills: ["\u{1F600}", "\uFFFF", "a"], tools: [] }));
    expect(input.enabled_skills).toEqual(["a", "\uFFFF", "\u{1F600}"]);
  });
});
