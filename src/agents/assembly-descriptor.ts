import {
  ASSEMBLY_NAMESPACE,
  assemblyFingerprint,
  canonicalHash,
  collectReleasePolicies,
  hashLongTextSync,
  isPlainObject,
  isReleasePolicyProvider,
  unwrapMiddleware,
  type AgentAssemblyDescriptor,
  type AssemblyMiddlewareDescriptor,
  type AssemblyToolDescriptor,
} from "../extension-api/index.ts";
import type { AgentMiddleware, AgentTool } from "../engine/types.ts";

export const PACKAGE_VERSION = "0.1.0";

export interface DescribeAgentInput {
  readonly agentName: string;
  readonly requestedModel: string | null;
  readonly effectiveModel: string;
  readonly modelParameters: Record<string, unknown>;
  readonly thinkingEnabled?: boolean;
  readonly reasoningEffort?: string | null;
  readonly systemPrompt: string;
  readonly tools: readonly AgentTool[];
  readonly middlewares: readonly AgentMiddleware[];
  readonly deferredToolNames?: readonly string[];
  readonly enabledSkills?: readonly string[];
  readonly effectivePolicies: Record<string, unknown>;
  readonly build?: { git_commit?: string | null; image_digest?: string | null };
}

/** Kebab-case module path of a built-in middleware, derived from its stable name. */
function moduleOf(name: string): string {
  return `deerflow-edge/middlewares/${name.replace(/([a-z0-9])([A-Z])/g, "$1-$2").toLowerCase()}`;
}

async function describeTool(tool: AgentTool): Promise<AssemblyToolDescriptor> {
  const mcp = tool.metadata?.deerflow_mcp as { server?: string; transport?: string } | undefined;
  return {
    name: tool.name,
    description_hash: await canonicalHash(tool.description),
    schema_hash: await canonicalHash(tool.schema),
    source: mcp ? "mcp" : typeof tool.metadata?.source === "string" ? tool.metadata.source : "builtin",
    mcp_server: mcp?.server ?? null,
    mcp_transport: mcp?.transport ?? null,
  };
}

/** The engine contract's members: described elsewhere (tools) or behaviour, never configuration. */
const CONTRACT_KEYS: ReadonlySet<string> = new Set([
  "name",
  "module",
  "tools",
  "beforeAgent",
  "beforeModel",
  "afterModel",
  "afterAgent",
  "wrapModelCall",
  "wrapToolCall",
  "releasePolicyParameters",
]);
const PROBE_DEPTH = 6;

/**
 * A probed value as it can appear in a descriptor: JSON scalars, long texts hashed (a prompt may
 * carry operator secrets), plain objects and arrays of those. Anything else (a client, a function,
 * a cycle, a non-finite number) is not configuration the host can compare, so it is left out.
 */
function probeValue(value: unknown, depth: number, ancestors: Set<object>): unknown {
  if (value === null || typeof value === "boolean") return value;
  if (typeof value === "number") return Number.isFinite(value) ? value : undefined;
  if (typeof value === "string") return hashLongTextSync(value);
  if (typeof value !== "object" || depth >= PROBE_DEPTH || ancestors.has(value)) return undefined;
  ancestors.add(value);
  try {
    if (Array.isArray(value)) {
      const items = value.map((item) => probeValue(item, depth + 1, ancestors));
      return items.includes(undefined) ? undefined : items;
    }
    if (!isPlainObject(value)) return undefined;
    return probeFields(value, depth + 1, ancestors, new Set());
  } finally {
    ancestors.delete(value);
  }
}

function probeFields(source: object, depth: number, ancestors: Set<object>, skip: ReadonlySet<string>): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  for (const key of Object.keys(source)) {
    if (skip.has(key)) continue;
    let raw: unknown;
    try {
      raw = (source as Record<string, unknown>)[key];
    } catch {
      continue;
    }
    const probed = probeValue(raw, depth, ancestors);
    if (probed !== undefined) fields[key] = probed;
  }
  return fields;
}

/**
 * The marked fallback for a middleware that declares no releasePolicyParameters(): its own data
 * fields (TypeScript `private` ones included, they are ordinary properties at runtime; `#private`
 * fields and closure state are unreachable), so a change in its configuration still moves the
 * fingerprint. The descriptor says `probed: true`, because fields are an implementation detail the
 * middleware never promised to keep stable.
 */
function probeMiddleware(middleware: AgentMiddleware): Record<string, unknown> {
  return probeFields(middleware, 0, new Set([middleware]), CONTRACT_KEYS);
}

/**
 * A middleware owns its identity through releasePolicyParameters(); one that declares none is
 * probed instead (see {@link probeMiddleware}). An isolation wrapper is unwrapped to its inner
 * middleware and its `source` recorded as the extension, so two extensions' contributions never
 * collapse into one descriptor.
 */
export function describeMiddleware(member: AgentMiddleware): AssemblyMiddlewareDescriptor {
  const inner = unwrapMiddleware(member) as AgentMiddleware;
  const extension = inner !== member && typeof (member as { source?: unknown }).source === "string"
    ? ((member as unknown as { source: string }).source)
    : null;
  const module = typeof (inner as { module?: unknown }).module === "string" ? (inner as unknown as { module: string }).module : moduleOf(inner.name);
  if (!isReleasePolicyProvider(inner)) {
    return { name: inner.name, module, policy_parameters: probeMiddleware(inner), extension, probed: true };
  }
  const policy = (Object.values(collectReleasePolicies([inner]))[0] as Record<string, unknown> | undefined) ?? null;
  return { name: inner.name, module, policy_parameters: policy, extension };
}

export async function describeAgent(input: DescribeAgentInput): Promise<{ descriptor: AgentAssemblyDescriptor; fingerprint: string }> {
  const descriptor: AgentAssemblyDescriptor = {
    namespace: ASSEMBLY_NAMESPACE,
    agent_name: input.agentName,
    requested_model: input.requestedModel,
    effective_model: input.effectiveModel,
    model_parameters: input.modelParameters,
    thinking_enabled: input.thinkingEnabled ?? false,
    reasoning_effort: input.reasoningEffort ?? null,
    base_prompt_hash: await canonicalHash(input.systemPrompt),
    tools: await Promise.all(input.tools.map(describeTool)),
    middlewares: input.middlewares.map(describeMiddleware),
    deferred_tool_names: [...(input.deferredToolNames ?? [])],
    enabled_skills: [...(input.enabledSkills ?? [])],
    effective_policies: input.effectivePolicies,
    build: {
      package_version: PACKAGE_VERSION,
      image_digest: input.build?.image_digest ?? null,
      git_commit: input.build?.git_commit ?? null,
    },
  };
  return { descriptor, fingerprint: await assemblyFingerprint(descriptor) };
}
