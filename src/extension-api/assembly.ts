import { canonicalHash, canonicalJson, compareCodePoints } from "./canonical.ts";

export const ASSEMBLY_NAMESPACE = "deerflow";

export interface AssemblyToolDescriptor {
  readonly name: string;
  readonly description_hash: string;
  readonly schema_hash: string;
  /** Where the tool came from, e.g. builtin, mcp, extension. */
  readonly source: string;
  readonly mcp_server: string | null;
  readonly mcp_transport: string | null;
}

export interface AssemblyMiddlewareDescriptor {
  readonly name: string;
  readonly module: string;
  /** The middleware's release policy declaration, or null when it declares none. */
  readonly policy_parameters: Readonly<Record<string, unknown>> | null;
  /** The contributing extension (an isolation wrapper's source), or null for host middlewares. */
  readonly extension: string | null;
  /** Set when policy_parameters were read from the middleware's fields instead of a declaration. */
  readonly probed?: boolean;
}

export interface AssemblyBuildInfo {
  readonly package_version: string;
  readonly image_digest: string | null;
  readonly git_commit: string | null;
}

/**
 * Everything decided while an agent is assembled that cannot be recovered from the graph
 * afterwards. Field names are snake_case because descriptors are exchanged with the Python host.
 */
export interface AgentAssemblyDescriptor {
  readonly namespace: typeof ASSEMBLY_NAMESPACE;
  readonly agent_name: string;
  readonly requested_model: string | null;
  readonly effective_model: string;
  readonly model_parameters: Readonly<Record<string, unknown>>;
  readonly thinking_enabled: boolean;
  readonly reasoning_effort: string | null;
  readonly base_prompt_hash: string;
  readonly tools: readonly AssemblyToolDescriptor[];
  /** In stack order, outermost first. */
  readonly middlewares: readonly AssemblyMiddlewareDescriptor[];
  readonly deferred_tool_names: readonly string[];
  readonly enabled_skills: readonly string[];
  readonly effective_policies: Readonly<Record<string, unknown>>;
  readonly build: AssemblyBuildInfo;
}

/**
 * The exact value {@link assemblyFingerprint} hashes; useful to diff two assemblies.
 * Tools, deferred names and skills are sorted because their assembly order is incidental;
 * middleware order is kept because it decides what wraps what. `build` and `requested_model`
 * are left out: the fingerprint answers "did this agent's assembly change", and folding in the
 * build would move every fingerprint on every redeploy.
 */
export function assemblyFingerprintInput(descriptor: AgentAssemblyDescriptor): Record<string, unknown> {
  return {
    namespace: descriptor.namespace,
    agent_name: descriptor.agent_name,
    effective_model: descriptor.effective_model,
    model_parameters: descriptor.model_parameters,
    thinking_enabled: descriptor.thinking_enabled,
    reasoning_effort: descriptor.reasoning_effort,
    base_prompt_hash: descriptor.base_prompt_hash,
    tools: sortTools(descriptor.tools),
    middlewares: descriptor.middlewares.map((middleware) => ({
      name: middleware.name,
      module: middleware.module,
      extension: middleware.extension,
      policy_parameters: middleware.policy_parameters,
    })),
    deferred_tool_names: [...descriptor.deferred_tool_names].sort(compareCodePoints),
    enabled_skills: [...descriptor.enabled_skills].sort(compareCodePoints),
    effective_policies: descriptor.effective_policies,
  };
}

/** canonicalHash of {@link assemblyFingerprintInput}: 64 lowercase hex digits. */
export async function assemblyFingerprint(descriptor: AgentAssemblyDescriptor): Promise<string> {
  return canonicalHash(assemblyFingerprintInput(descriptor));
}

function sortTools(tools: readonly AssemblyToolDescriptor[]): AssemblyToolDescriptor[] {
  const projected = tools.map((tool) => ({
    name: tool.name,
    description_hash: tool.description_hash,
    schema_hash: tool.schema_hash,
    source: tool.source,
    mcp_server: tool.mcp_server,
    mcp_transport: tool.mcp_transport,
  }));
  // Two tools may share a name (say, from two MCP servers); ordering those by their full content
  // keeps the fingerprint independent of which one was registered first.
  const withKeys = projected.map((tool) => ({ tool, key: canonicalJson(tool) }));
  withKeys.sort((a, b) => compareCodePoints(a.tool.name, b.tool.name) || compareCodePoints(a.key, b.key));
  return withKeys.map(({ tool }) => tool);
}
