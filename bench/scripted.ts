// The scripted model and no-op tool the chain-overhead and extensions benchmarks share: the same
// work for every engine, so what differs between configurations is the engine alone.
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { ChatResult } from "@langchain/core/outputs";
import type { AgentTool } from "../src/engine/index.ts";

/**
 * Answers with one `noop` tool call while fewer than `toolRounds` ToolMessages follow the last human
 * message, then with a final text. Ids are derived from the round, so all engines produce the same
 * messages.
 */
export class ScriptedChatModel extends BaseChatModel {
  readonly toolRounds: number;

  constructor(toolRounds: number) {
    super({});
    this.toolRounds = toolRounds;
  }

  _llmType(): string {
    return "scripted";
  }

  // What provider models do (ChatOpenAI: `withConfig({ tools, ...kwargs })`), minus converting the
  // tool schemas, so binding stays cheap and is the same for every caller.
  override bindTools(tools: any[], kwargs?: Record<string, unknown>): any {
    return this.withConfig({ tools, ...kwargs } as never);
  }

  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    const message = scriptedReply(messages, this.toolRounds);
    return { generations: [{ text: typeof message.content === "string" ? message.content : "", message }] };
  }
}

function scriptedReply(messages: readonly BaseMessage[], toolRounds: number): AIMessage {
  let lastHuman = -1;
  for (let i = messages.length - 1; i >= 0; i--) {
    if (HumanMessage.isInstance(messages[i])) {
      lastHuman = i;
      break;
    }
  }
  let answered = 0;
  for (let i = lastHuman + 1; i < messages.length; i++) if (ToolMessage.isInstance(messages[i])) answered++;
  if (answered < toolRounds) {
    return new AIMessage({ content: "", tool_calls: [{ name: "noop", args: { i: answered }, id: `call_${answered}`, type: "tool_call" }] });
  }
  return new AIMessage({ content: `done after ${answered} tool calls` });
}

/** The one tool body every engine (and the direct loop) runs. */
export const noopBody = async (): Promise<string> => "ok";

export const TOOL_DESCRIPTION = "does nothing and answers ok";

export const ourNoop: AgentTool = {
  name: "noop",
  description: TOOL_DESCRIPTION,
  schema: { type: "object", properties: { i: { type: "number" } }, required: ["i"] },
  invoke: noopBody,
};
