import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { GraphRecursionError, isGraphBubbleUp } from "@langchain/langgraph/web";
import { DeerflowError, errorMessage } from "../core/errors.ts";
import { newId } from "../core/ids.ts";
import { Agent, type RunRecord } from "../engine/agent.ts";
import type { AgentRuntime } from "../engine/types.ts";
import { sha256HexSync } from "../extension-api/sha256-sync.ts";
import { EXTENSION_TASK_STORE_KEY, ExtensionData, taskInfo, type AgentAssemblyDescriptor, type TaskOutcome } from "../extension-api/index.ts";
import { isOneOf } from "../extension-api/one-of.ts";
import { notifyTaskStart, notifyTaskStop, subagentTaskOutcome } from "../extensions/notify.ts";
import type { LoadedExtensions } from "../extensions/registry.ts";
import { bindExtensionSnapshot, resolveRunExtensions } from "../extensions/run-context.ts";
import { emitEvent } from "../engine/events.ts";
import { LOOP_DETECTION_EVENT } from "../middlewares/loop-detection/index.ts";
import { messageText } from "../middlewares/messages.ts";
import { adoptDelegatedSandbox, bindDelegatedSandbox, sandboxScopeOf } from "../sandbox/acquire.ts";
import { STOP_REASON_KEY } from "../middlewares/stop-reason.ts";
import {
  SUBAGENT_STOP_REASONS,
  boundSubagentText,
  type SubagentStatus,
  type SubagentStopReason,
} from "../middlewares/tool-error-handling/index.ts";
import type { ThreadState } from "../state/thread-state.ts";
import { subagentThreadId, type RunSubagentOptions, type SubagentRunResult, type SubagentTerminalStatus, type SubagentUsage } from "../tools/subagent-run.ts";

export {
  subagentThreadId,
  type RunSubagentOptions,
  type SubagentParent,
  type SubagentRunResult,
  type SubagentTerminalStatus,
  type SubagentUsage,
} from "../tools/subagent-run.ts";

/*
 * Runs one delegated task on the subagent's own graph and turns however it ended into a terminal
 * verdict the `task` tool can report. The subagent never shares the parent's graph, thread or run
 * scope: it gets a thread of its own (derived from the parent thread and the tool call, so a
 * replayed call lands on the same thread) and a fresh run scope, and only identity facts cross over.
 */

export const SUBAGENT_PROGRESS_EVENT = "subagent_progress";
/** What a run that ended without any model text reports, so a missing result never reads as an empty one. */
export const NO_RESPONSE_TEXT = "No response generated";

function copyAttributes(value: unknown): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return {};
  // A deep copy: nested lists in the attributes must not be shared with the parent either.
  return structuredClone(value) as Record<string, unknown>;
}

/**
 * The subagent's caller context: identity only. is_internal is a strict boolean written even when
 * false, so a subagent never inherits "internal" from a truthy string; authz_attributes is a copy,
 * so nothing the subagent does to it reaches the parent.
 */
export function buildSubagentContext(
  parentContext: Readonly<Record<string, unknown>>,
  facts: { threadId: string; parentThreadId: string | undefined; parentRunId: string; toolCallId: string; subagentType: string },
): Record<string, unknown> {
  const context: Record<string, unknown> = {
    thread_id: facts.threadId,
    parent_run_id: facts.parentRunId,
    parent_tool_call_id: facts.toolCallId,
    subagent_type: facts.subagentType,
    is_subagent: true,
    is_internal: parentContext["is_internal"] === true,
    authz_attributes: copyAttributes(parentContext["authz_attributes"]),
  };
  if (facts.parentThreadId !== undefined) context["parent_thread_id"] = facts.parentThreadId;
  if (typeof parentContext["user_id"] === "string") context["user_id"] = parentContext["user_id"];
  return context;
}

function usageOf(messages: readonly BaseMessage[]): SubagentUsage {
  const usage: SubagentUsage = { input_tokens: 0, output_tokens: 0, total_tokens: 0 };
  for (const message of messages) {
    if (!AIMessage.isInstance(message) || !message.usage_metadata) continue;
    const { input_tokens: input, output_tokens: output, total_tokens: total } = message.usage_metadata;
    usage.input_tokens += Number.isFinite(input) ? input : 0;
    usage.output_tokens += Number.isFinite(output) ? output : 0;
    usage.total_tokens += Number.isFinite(total) ? total : 0;
  }
  return usage;
}

function lastAiText(messages: readonly BaseMessage[]): string | undefined {
  for (let index = messages.length - 1; index >= 0; index -= 1) {
    const message = messages[index]!;
    if (AIMessage.isInstance(message)) return messageText(message).trim();
  }
  return undefined;
}

function scopeStopReason(record: RunRecord | undefined): SubagentStopReason | null {
  const reason = record?.scope.get<string>(STOP_REASON_KEY);
  return isOneOf(SUBAGENT_STOP_REASONS, reason) ? reason : null;
}

/**
 * The loop-detection-only recorder: of the subagent's custom events, only its LoopDetection
 * transitions reach the parent's writer, and from there the parent run's journal. The subagent
 * never gets the parent's writer (or journal) itself.
 */
function forwardLoopDetection(parent: AgentRuntime, event: unknown): void {
  if (typeof event !== "object" || event === null || (event as { type?: unknown }).type !== LOOP_DETECTION_EVENT) return;
  emitEvent(parent, event);
}

/**
 * Runs a delegated task to a terminal verdict. Never throws for anything the subagent did (its
 * failures, a timeout, the parent's abort become the verdict); only a graph bubble-up of the
 * subagent's own run is rethrown untouched.
 */
/**
 * Runs one delegated subagent. The subagent runs with the parent run's extension snapshot, or,
 * when the run carries none, `fallbackExtensions` (the ones the delegating agent was assembled
 * with); with either it is a task of its own for the task-lifecycle contributors (kind `subagent`,
 * the parent run as parent task), and its builder composes and describes it with that snapshot.
 */
export async function runSubagent(options: RunSubagentOptions, fallbackExtensions?: LoadedExtensions): Promise<SubagentRunResult> {
  // Absent the parent run's snapshot (an embedded caller, a tool invoked outside a run): the
  // extensions the delegating agent was assembled with.
  const extensions = resolveRunExtensions(options.parent.runtime.context) ?? fallbackExtensions;
  if (!extensions || !extensions.needsTaskStore) return runSubagentTask(options, extensions, undefined);
  const store = new ExtensionData(options.parent.toolCallId);
  const info = taskInfo({
    taskId: options.parent.toolCallId,
    runId: options.parent.runId,
    threadId: subagentThreadId(options.parent.threadId, options.parent.toolCallId),
    kind: "subagent",
    parentTaskId: options.parent.runId,
    agentName: `subagent:${options.type.name}`,
  });
  const notifyOptions = { clock: options.parent.runtime.services.clock };
  await notifyTaskStart(extensions.taskLifecycle, extensions.appStore, store, info, notifyOptions);
  let outcome: TaskOutcome = "failed";
  try {
    const result = await runSubagentTask(options, extensions, store);
    outcome = subagentTaskOutcome({ cancelled: result.status === "cancelled" || result.status === "timed_out", succeeded: result.status === "completed" });
    return result;
  } finally {
    await notifyTaskStop(extensions.taskLifecycle, extensions.appStore, store, info, outcome, notifyOptions).catch(() => {});
  }
}

async function runSubagentTask(
  options: RunSubagentOptions,
  extensions: LoadedExtensions | undefined,
  taskStore: ExtensionData | undefined,
): Promise<SubagentRunResult> {
  const { type, parent } = options;
  const writer = parent.runtime.writer;
  const clock = parent.runtime.services.clock;
  const threadId = subagentThreadId(parent.threadId, parent.toolCallId);
  const runId = newId("subrun");
  const progress = (phase: string, extra: Record<string, unknown> = {}): void =>
    writer({
      type: SUBAGENT_PROGRESS_EVENT,
      tool_call_id: parent.toolCallId,
      phase,
      subagent_type: type.name,
      description: options.description,
      thread_id: threadId,
      run_id: runId,
      ...extra,
    });

  const controller = new AbortController();
  // The first of cancel/timeout to fire decides the verdict; an abort races the run ending.
  let interruption: "cancelled" | "timed_out" | undefined;
  const parentSignal = parent.runtime.signal;
  const onParentAbort = (): void => {
    interruption ??= "cancelled";
    controller.abort(parentSignal?.reason);
  };
  if (parentSignal?.aborted) onParentAbort();
  else parentSignal?.addEventListener("abort", onParentAbort, { once: true });
  const timer = new AbortController();
  clock.sleep(type.timeoutMs, timer.signal).then(
    () => {
      interruption ??= "timed_out";
      controller.abort(new DeerflowError("subagent_timed_out", `Subagent "${type.name}" ran past its ${type.timeoutMs} ms limit.`));
    },
    () => {},
  );
  // A subagent stuck in a call that ignores its signal must still not hold the parent past the limit.
  const stopped = new Promise<never>((_, reject) => {
    const fire = (): void => reject(controller.signal.reason);
    if (controller.signal.aborted) fire();
    else controller.signal.addEventListener("abort", fire, { once: true });
  });
  stopped.catch(() => {});

  let record: RunRecord | undefined;
  let messages: readonly BaseMessage[] = [];
  let reported = 0;
  let iterator: AsyncIterator<unknown> | undefined;
  let assemblyDescriptor: AgentAssemblyDescriptor | undefined;
  const finish = (status: SubagentTerminalStatus, stopReason: SubagentStopReason | null, result?: string, error?: string): SubagentRunResult => {
    const usage = usageOf(messages);
    const verdict: SubagentRunResult = {
      status,
      stop_reason: stopReason,
      result_brief: result !== undefined ? boundSubagentText(result) : null,
      result_sha256: result !== undefined ? sha256HexSync(result) : null,
      usage,
      result,
      error,
      messages,
      thread_id: threadId,
      run_id: runId,
      ...(assemblyDescriptor ? { assembly_descriptor: assemblyDescriptor } : {}),
    };
    progress(status, {
      ...(verdict.result_brief !== null ? { result_brief: verdict.result_brief } : {}),
      ...(error !== undefined ? { error: boundSubagentText(error) } : {}),
      stop_reason: stopReason,
      usage,
    });
    return verdict;
  };

  // The lead thread's sandbox, used as a non-owner: what the subagent writes is there for the lead.
  const sandboxScope = sandboxScopeOf(parent.runtime);
  progress("started", { max_turns: type.maxTurns, timeout_ms: type.timeoutMs });
  try {
    if (controller.signal.aborted) throw controller.signal.reason;
    const built = await Promise.race([Promise.resolve(options.buildAgent(type, { extensions })), stopped]);
    const agent = built instanceof Agent ? built : built.agent;
    if (!(built instanceof Agent)) assemblyDescriptor = built.descriptor;
    const context = buildSubagentContext(parent.runtime.context, {
      threadId,
      parentThreadId: parent.threadId,
      parentRunId: parent.runId,
      toolCallId: parent.toolCallId,
      subagentType: type.name,
    });
    const runContext = {
      ...context,
      ...(sandboxScope ? bindDelegatedSandbox(sandboxScope) : {}),
      ...(extensions ? bindExtensionSnapshot(extensions) : {}),
      ...(taskStore ? { [EXTENSION_TASK_STORE_KEY]: taskStore } : {}),
    };
    const recordLoops = options.recordLoopDetection === true;
    const stream = agent.stream(
      { messages: [new HumanMessage(options.prompt)] },
      {
        threadId,
        runId,
        context: runContext,
        signal: controller.signal,
        streamMode: recordLoops ? ["values", "custom"] : "values",
        recursionLimit: type.maxTurns,
      },
      (r) => (record = r),
    );
    iterator = stream[Symbol.asyncIterator]();
    for (;;) {
      const next = await Promise.race([iterator.next(), stopped]);
      if (next.done) break;
      let values = next.value;
      if (recordLoops) {
        const [mode, chunk] = next.value as [string, unknown];
        if (mode === "custom") {
          forwardLoopDetection(parent.runtime, chunk);
          continue;
        }
        values = chunk;
      }
      messages = (values as ThreadState).messages ?? [];
      const ai = messages.filter((m) => AIMessage.isInstance(m)) as AIMessage[];
      for (; reported < ai.length; reported += 1) {
        const message = ai[reported]!;
        progress("running", {
          message_index: reported + 1,
          text: boundSubagentText(messageText(message)),
          tool_calls: (message.tool_calls ?? []).map((call) => call.name),
          usage: usageOf(messages),
        });
      }
    }
    if (interruption) throw controller.signal.reason;
    const text = lastAiText(messages);
    return finish("completed", scopeStopReason(record), text || NO_RESPONSE_TEXT);
  } catch (error) {
    if (interruption === "cancelled") return finish("cancelled", null, undefined, "Task cancelled by user.");
    if (interruption === "timed_out") return finish("timed_out", null, undefined, `Task timed out after ${type.timeoutMs} ms.`);
    if (isGraphBubbleUp(error)) throw error;
    if (error instanceof GraphRecursionError) {
      // Out of turns is a budget verdict, not a broken subagent: partial work still counts as done.
      const stopReason = scopeStopReason(record) ?? "turn_capped";
      const partial = lastAiText(messages);
      if (partial) return finish("completed", stopReason, partial);
      return finish("failed", stopReason, undefined, `Reached max_turns=${type.maxTurns}`);
    }
    return finish("failed", scopeStopReason(record), undefined, errorMessage(error) || "Task failed.");
  } finally {
    // A sandbox the subagent acquired is the delegating run's to bind and release.
    if (record && sandboxScope) adoptDelegatedSandbox(parent.runtime, record.scope);
    timer.abort();
    parentSignal?.removeEventListener("abort", onParentAbort);
    if (!controller.signal.aborted) controller.abort();
    // The generator may still be inside a step we stopped waiting for; let it unwind on its own.
    iterator?.return?.(undefined).catch(() => {});
  }
}
