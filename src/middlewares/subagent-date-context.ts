import type { BaseMessage } from "@langchain/core/messages";
import * as v from "valibot";
import { newId } from "../core/ids.ts";
import type { AgentMiddleware, AgentRuntime, AgentState, HookResult } from "../engine/types.ts";
import { parseMiddlewareConfig } from "../engine/middleware-config.ts";
import { DynamicContextConfigSchema, REMINDER_DATE_KEY, currentDateFormatter, dateReminderMessage, isDynamicContextReminder } from "./dynamic-context.ts";

export const SUBAGENT_DATE_CONTEXT_NAME = "SubagentDateContext";

export const SubagentDateContextConfigSchema = v.strictObject({
  /** IANA zone the current date is read in; the lead's dynamic_context.current_date_timezone, so both agree on "today". */
  current_date_timezone: DynamicContextConfigSchema.entries.current_date_timezone,
});
export type SubagentDateContextConfig = v.InferOutput<typeof SubagentDateContextConfigSchema>;
export type SubagentDateContextConfigInput = v.InferInput<typeof SubagentDateContextConfigSchema>;

function hasReminderFor(messages: readonly BaseMessage[], date: string): boolean {
  return messages.some((message) => isDynamicContextReminder(message) && message.additional_kwargs?.[REMINDER_DATE_KEY] === date);
}

/**
 * A subagent needs the lead's temporal anchor but none of DynamicContext's memory recall, id swap
 * or midnight refresh: each subagent run starts from fresh state and is one-shot, so one hidden
 * date reminder before its first model call is enough. It carries the same flags and provenance as
 * the lead's reminder, so coalescing, summarization and observers treat both alike. A resumed run
 * that already holds today's reminder gets no second one.
 */
export function createSubagentDateContextMiddleware(config?: SubagentDateContextConfigInput): AgentMiddleware {
  const settings = parseMiddlewareConfig(
    SubagentDateContextConfigSchema,
    config,
    SUBAGENT_DATE_CONTEXT_NAME,
    "Fix dynamic_context.current_date_timezone.",
  );
  const formatDate = currentDateFormatter(settings.current_date_timezone);

  function beforeAgent(state: AgentState, runtime: AgentRuntime): HookResult {
    const today = formatDate(runtime.services.clock.now());
    if (hasReminderFor(state.messages, today)) return undefined;
    return { messages: [dateReminderMessage(today, newId("subagent-date"))] };
  }

  return {
    name: SUBAGENT_DATE_CONTEXT_NAME,
    beforeAgent,
    releasePolicyParameters: () => ({ current_date_timezone: settings.current_date_timezone }),
  };
}
