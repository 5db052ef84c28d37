import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import type { AgentAssemblyDescriptor } from "../extension-api/index.ts";
import type { AppConfig } from "../config/index.ts";
import { createAgent, type Agent } from "../engine/agent.ts";
import type { AgentServices } from "../engine/services.ts";
import type { AgentMiddleware } from "../engine/types.ts";
import { createChatModel, describeModel, type ModelDescription } from "../models/factory.ts";
import type { Env } from "../ports/runtime-ports.ts";
import { createDanglingToolCallMiddleware } from "../middlewares/dangling-tool-call.ts";
import { createSystemMessageCoalescingMiddleware } from "../middlewares/system-message-coalescing.ts";
import { createThreadDataMiddleware } from "../middlewares/thread-data.ts";
import { createToolErrorHandlingMiddleware } from "../middlewares/tool-error-handling.ts";
import { createSandboxTools } from "../tools/sandbox-tools.ts";
import { describeAgent } from "./assembly-descriptor.ts";
import { LEAD_AGENT_PROMPT, LEAD_AGENT_PROMPT_ID } from "./prompts.ts";

export const LEAD_AGENT_NAME = "lead-agent";

export interface LeadAgentOptions {
  readonly config: AppConfig;
  readonly services: AgentServices;
  readonly env: Env;
  /** The model the request asked for; falls back to the config's default, then `demo`. */
  readonly model?: string;
  readonly checkpointer?: BaseCheckpointSaver;
}

export interface LeadAgentAssembly {
  /** Name, provider and model id of the model in use; `is_demo` marks the built-in demo model. */
  readonly model: ModelDescription;
  readonly agent: Agent;
  readonly graph: Agent["graph"];
  readonly descriptor: AgentAssemblyDescriptor;
  /** canonicalHash of the descriptor without build facts: "did this agent's assembly change?" */
  readonly fingerprint: string;
}

/**
 * The lead chain in the spec's order (outer to inner). Only the middlewares built so far are
 * present; each later one slots in at its numbered position.
 */
export function buildLeadMiddlewares(config: AppConfig): AgentMiddleware[] {
  void config;
  return [
    createThreadDataMiddleware(), // 4
    createDanglingToolCallMiddleware(), // 7
    createToolErrorHandlingMiddleware(), // 14
    createSystemMessageCoalescingMiddleware(), // 27
  ];
}

export async function assembleLeadAgent(options: LeadAgentOptions): Promise<LeadAgentAssembly> {
  const { config } = options;
  const model = createChatModel(config, options.model, options.env);
  const modelInfo = describeModel(options.model, config);
  const entry = config.models.find((m) => m.name === modelInfo.name);
  // Identity, not credentials or labels: what changes the model's behaviour.
  const modelParameters: Record<string, unknown> = {
    provider: modelInfo.provider,
    model: modelInfo.model,
    ...(entry?.base_url && !modelInfo.is_demo ? { base_url: entry.base_url } : {}),
    ...(entry?.temperature === undefined ? {} : { temperature: entry.temperature }),
    ...(entry?.max_tokens === undefined ? {} : { max_tokens: entry.max_tokens }),
  };
  const systemPrompt = config.agent.system_prompt ?? LEAD_AGENT_PROMPT;
  const middlewares = buildLeadMiddlewares(config);
  const tools = createSandboxTools();
  const agent = createAgent({
    name: LEAD_AGENT_NAME,
    model,
    tools,
    middlewares,
    systemPrompt,
    checkpointer: options.checkpointer,
    services: options.services,
    recursionLimit: config.agent.recursion_limit,
  });
  const { descriptor, fingerprint } = await describeAgent({
    agentName: LEAD_AGENT_NAME,
    requestedModel: options.model ?? null,
    effectiveModel: modelInfo.name,
    modelParameters,
    systemPrompt,
    tools: agent.tools,
    middlewares,
    effectivePolicies: {
      prompt_template_id: config.agent.system_prompt ? "custom" : LEAD_AGENT_PROMPT_ID,
      recursion_limit: config.agent.recursion_limit,
      sandbox: options.services.sandbox?.kind ?? null,
      plan_mode: false,
      subagents: false,
      non_interactive: false,
    },
  });
  return { agent, graph: agent.graph, model: modelInfo, descriptor, fingerprint };
}
