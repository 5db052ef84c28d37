import { AIMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { ToolCall } from "@langchain/core/messages/tool";
import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { RunnableConfig } from "@langchain/core/runnables";
import { Command, END, isCommand, type LangGraphRunnableConfig } from "@langchain/langgraph/web";
import { DeerflowError } from "../core/errors.ts";
import type { ThreadStateUpdate } from "../state/thread-state.ts";
import type { AgentTool, ModelRequest, ToolCallRequest, ToolResult } from "./types.ts";

// The innermost handlers every wrapModelCall and wrapToolCall chain ends in: the model call with
// the agent's tools bound (cached per model, tool list and tool choice), one tool's invocation,
// and a tool result turned into the update the tools node returns.

const boundModels = new WeakMap<BaseChatModel, WeakMap<readonly AgentTool[], Map<string, unknown>>>();

function bindModel(model: BaseChatModel, tools: readonly AgentTool[], toolChoice: string | undefined) {
  if (tools.length === 0) return model;
  if (typeof model.bindTools !== "function") {
    throw new DeerflowError("model_cannot_bind_tools", `Model ${model.getName()} does not support tool calling, but the agent has tools.`);
  }
  let byTools = boundModels.get(model);
  if (!byTools) boundModels.set(model, (byTools = new WeakMap()));
  let byChoice = byTools.get(tools);
  if (!byChoice) byTools.set(tools, (byChoice = new Map()));
  const key = toolChoice ?? "";
  let bound = byChoice.get(key);
  if (!bound) {
    const definitions = tools.map((tool) => ({
      type: "function" as const,
      function: { name: tool.name, description: tool.description, parameters: tool.schema },
    }));
    bound = model.bindTools(definitions, toolChoice ? { tool_choice: toolChoice } : undefined);
    byChoice.set(key, bound);
  }
  return bound as { invoke(input: BaseMessage[], config?: RunnableConfig): Promise<BaseMessage> };
}

export async function callModel(request: ModelRequest, config: LangGraphRunnableConfig): Promise<AIMessage> {
  const messages = request.systemMessage ? [request.systemMessage, ...request.messages] : [...request.messages];
  const runnable = bindModel(request.model, request.tools, request.toolChoice);
  const output = await runnable.invoke(messages, config);
  if (!AIMessage.isInstance(output)) {
    throw new DeerflowError("invalid_model_response", `Model ${request.model.getName()} returned a ${output?.getType?.() ?? typeof output} message, not an AI message.`);
  }
  return output;
}

export async function runTool(request: ToolCallRequest): Promise<ToolResult> {
  const { toolCall, tool } = request;
  const id = toolCall.id ?? "";
  if (!tool) {
    return new ToolMessage({
      content: `Error: ${toolCall.name || "(unnamed)"} is not a valid tool; call one of the tools you were given.`,
      tool_call_id: id,
      name: toolCall.name,
      status: "error",
    });
  }
  const output = await tool.invoke(toolCall.args ?? {}, { toolCall, state: request.state, runtime: request.runtime });
  if (isCommand(output) || ToolMessage.isInstance(output)) {
    if (ToolMessage.isInstance(output) && !output.tool_call_id) output.tool_call_id = id;
    return output as ToolResult;
  }
  return new ToolMessage({ content: output as string, tool_call_id: id, name: tool.name });
}

export function toolResultToUpdate(result: ToolResult, toolCall: ToolCall): Command | ThreadStateUpdate {
  if (ToolMessage.isInstance(result)) return { messages: [result] };
  if (!isCommand(result)) {
    throw new DeerflowError("invalid_tool_result", `A wrapToolCall for "${toolCall.name}" returned neither a ToolMessage nor a Command.`);
  }
  const command = result as Command;
  const writes = command._updateAsTuples().map(([k, v]) => [k, v] as [string, unknown]);
  const gotos = command.goto === undefined ? [] : Array.isArray(command.goto) ? command.goto : [command.goto];
  const ends = gotos.some((g) => g === END || g === "end");
  const others = gotos.filter((g) => !(g === END || g === "end"));
  if (others.length > 0) {
    throw new DeerflowError("invalid_tool_goto", `Tool "${toolCall.name}" returned a Command going to ${JSON.stringify(others)}; a tool may only end the run.`);
  }
  if (ends) writes.push(["jump_to", "end"]);
  return new Command({ update: writes });
}
