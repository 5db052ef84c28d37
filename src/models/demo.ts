// The built-in demo model: a scripted chat model (write notes, run bash, read them back, answer) for
// trying the harness without a provider; what it says is deterministic, its ids are fresh per call.
import { estimateTokens } from "../core/tokens.ts";
import type { BindToolsInput } from "@langchain/core/language_models/chat_models";
import type { AIMessage, BaseMessage, ToolCall } from "@langchain/core/messages";
import { DEMO_MODEL_NAME } from "../config/schema.ts";
import { isUserTurn, oneLine, textOf, userInputOf } from "./text.ts";
import { ScriptedChatModel, callNonce, stableHash, type ScriptedChatModelCallOptions, type ScriptedChatModelFields, type ScriptedTurn } from "./scripted.ts";
import { toOpenAITool, type OpenAIFunctionTool } from "./tools.ts";

/** Set on every AIMessage of the demo model, so a UI or the CLI can label it. */
export const DEMO_MODEL_MARKER = "deerflow_demo_model";
export const DEMO_WORKSPACE = "/mnt/user-data/workspace";
export const DEMO_NOTES_PATH = `${DEMO_WORKSPACE}/notes.md`;
export const DEMO_INSPECT_COMMAND = `wc -w ${DEMO_NOTES_PATH} && ls ${DEMO_WORKSPACE}`;

export type DemoChatModelFields = ScriptedChatModelFields;
export type DemoChatModelCallOptions = ScriptedChatModelCallOptions;

type Step = "write" | "bash" | "read";

interface ToolOutcome {
  name: string;
  args: Record<string, unknown>;
  content: string;
  failed: boolean;
}

const STOPWORDS = new Set(
  (
    "a an and are about after all also any as at be because been before being but by can could did do does " +
    "for from had has have how i if in into is it its just like make me more most my no not now of on one only " +
    "or other our out over please so some such than that the their them then there these they this to too up us " +
    "use very was we were what when where which while who why will with would you your write give tell show " +
    "find help need want each few many much should compare explain describe create build summarize summarise " +
    "research list recommend draft"
  ).split(" "),
);

function titleOf(task: string): string {
  const firstLine = task.split(/\r?\n/).find((line) => line.trim() !== "")?.trim() ?? "";
  const sentence = firstLine.split(/(?<=[.!?])\s/)[0] ?? firstLine;
  if (sentence.length <= 80) return sentence;
  const cut = sentence.slice(0, 78);
  const atWord = cut.lastIndexOf(" ") > 40 ? cut.slice(0, cut.lastIndexOf(" ")) : cut;
  return `${atWord.replace(/[\s,;:.]+$/, "")}…`;
}

/** Up to six content words of the request, most frequent first, ties in order of appearance. */
function keyTermsOf(task: string): string[] {
  const counts = new Map<string, number>();
  for (const word of task.toLowerCase().match(/[\p{L}\p{N}][\p{L}\p{N}'-]*/gu) ?? []) {
    if (word.length < 4 || STOPWORDS.has(word) || /^\d+$/.test(word)) continue;
    counts.set(word, (counts.get(word) ?? 0) + 1);
  }
  return [...counts.entries()]
    .map(([word, count], order) => ({ word, count, order }))
    .sort((a, b) => b.count - a.count || a.order - b.order)
    .slice(0, 6)
    .map((entry) => entry.word);
}

function quote(text: string, max = 600): string {
  const trimmed = text.trim();
  return trimmed.length > max ? `${trimmed.slice(0, max)}\n… (${trimmed.length - max} more characters)` : trimmed;
}

function notesFor(task: string): string {
  const terms = keyTermsOf(task);
  const quoted = task
    .trim()
    .split(/\r?\n/)
    .map((line) => `> ${line}`.trimEnd())
    .join("\n");
  const termLines = terms.length > 0 ? terms.map((term) => `- ${term}`).join("\n") : "- (no key terms found)";
  const focus = terms.slice(0, 2).join(" and ") || "the request";
  return [
    `# Notes: ${titleOf(task) || "untitled request"}`,
    "",
    "Request, as received:",
    "",
    quoted,
    "",
    "## Key terms",
    "",
    termLines,
    "",
    "## Plan",
    "",
    `1. Pin down the goal: ${(titleOf(task) || "the request").replace(/[.!?…]+$/, "")}.`,
    `2. Collect what is needed about ${focus}.`,
    `3. Draft the result in ${DEMO_WORKSPACE} and check it.`,
    "",
    "_Written by the deerflow-edge demo model (offline, no API key)._",
    "",
  ].join("\n");
}

const DEMO_FOOTER =
  "I am deerflow-edge's built-in demo model: I run offline and follow a fixed script, so this shows the agent loop " +
  "rather than a real answer. Add a model with `use: openai-compatible` to config.yaml for real work.";

/**
 * The built-in offline model. Given a task it writes notes into the sandbox workspace, inspects
 * them, and then reports what the tools actually returned. Each step is chosen from the
 * conversation: its own tool rounds since the user's last message and the tools that are bound.
 */
export class DemoChatModel extends ScriptedChatModel {
  protected readonly marker: string = DEMO_MODEL_MARKER;
  protected readonly reportedModelName: string = DEMO_MODEL_NAME;

  static override lc_name(): string {
    return "DemoChatModel";
  }

  _llmType(): string {
    return DEMO_MODEL_NAME;
  }

  protected planTurn(messages: BaseMessage[], options: this["ParsedCallOptions"]): ScriptedTurn {
    return planTurn(messages, options.tools ?? []);
  }
}

function toolIndex(tools: readonly (OpenAIFunctionTool | BindToolsInput)[]): Map<string, OpenAIFunctionTool> {
  const index = new Map<string, OpenAIFunctionTool>();
  for (const tool of tools) {
    const converted = toOpenAITool(tool);
    index.set(converted.function.name, converted);
  }
  return index;
}

/** What the demo says at each step of its script, and the one tool call it makes there. */
const STEP_SCRIPT: Readonly<
  Record<Step, { say: string; tool: string; purpose: string; args(task: string): Record<string, unknown> }>
> = {
  write: {
    say: `I'll start by writing my notes on this to ${DEMO_NOTES_PATH}.`,
    tool: "write_file",
    purpose: "Write notes for the request",
    args: (task) => ({ path: DEMO_NOTES_PATH, content: notesFor(task) }),
  },
  bash: {
    say: "Now let me check what is in the workspace.",
    tool: "bash",
    purpose: "Count the words in the notes and list the workspace",
    args: () => ({ command: DEMO_INSPECT_COMMAND }),
  },
  read: {
    say: "Let me read the notes back to check them.",
    tool: "read_file",
    purpose: "Read the notes back",
    args: () => ({ path: DEMO_NOTES_PATH }),
  },
};

/** Adds `description` only when the bound tool declares it (DeerFlow's sandbox tools do). */
function argsFor(tool: OpenAIFunctionTool, description: string, args: Record<string, unknown>): Record<string, unknown> {
  const properties = tool.function.parameters?.properties;
  const declares =
    typeof properties === "object" && properties !== null && Object.hasOwn(properties, "description");
  return declares ? { description, ...args } : args;
}

function planTurn(messages: readonly BaseMessage[], tools: readonly (OpenAIFunctionTool | BindToolsInput)[]): ScriptedTurn {
  const bound = toolIndex(tools);
  const userIndex = messages.findLastIndex(isUserTurn);
  const task = userInputOf(userIndex >= 0 ? textOf(messages[userIndex]!.content) : "");
  const since = messages.slice(userIndex + 1);

  const calls = new Map<string, ToolCall>();
  let rounds = 0;
  for (const message of since) {
    if (message.type !== "ai") continue;
    const toolCalls = (message as AIMessage).tool_calls ?? [];
    if (toolCalls.length > 0) rounds++;
    for (const call of toolCalls) if (call.id !== undefined) calls.set(call.id, call);
  }
  const outcomes: ToolOutcome[] = [];
  for (const message of since) {
    if (message.type !== "tool") continue;
    const tool = message as BaseMessage & { tool_call_id?: string; status?: string };
    const call = tool.tool_call_id === undefined ? undefined : calls.get(tool.tool_call_id);
    const content = textOf(tool.content);
    outcomes.push({
      name: call?.name ?? tool.name ?? "tool",
      args: call?.args ?? {},
      content,
      failed: tool.status === "error" || /^error\b/i.test(content.trim()),
    });
  }

  const steps: Step[] = [];
  if (bound.has("write_file")) steps.push("write");
  if (bound.has("bash")) steps.push("bash");
  else if (bound.has("read_file")) steps.push("read");

  const seed = stableHash(
    messages
      .map((m) => {
        const calls = m.type === "ai" ? JSON.stringify((m as AIMessage).tool_calls ?? []) : "";
        const callId = (m as BaseMessage & { tool_call_id?: string }).tool_call_id ?? "";
        return `${m.type}\u0001${textOf(m.content)}\u0001${calls}\u0001${callId}`;
      })
      .join("\u0000") + `\u0002${[...bound.keys()].join(",")}`,
  );
  const inputTokens = messages.reduce(
    (sum, m) => sum + estimateTokens(textOf(m.content)) + (m.type === "ai" ? estimateTokens(JSON.stringify((m as AIMessage).tool_calls ?? [])) : 0),
    0,
  );

  const earlierFailure = outcomes.some((outcome) => outcome.failed);
  const step = task !== "" && !earlierFailure ? steps[rounds] : undefined;

  let content: string;
  let toolCalls: ToolCall[] = [];
  if (step !== undefined) {
    const script = STEP_SCRIPT[step];
    content = script.say;
    toolCalls = [
      {
        type: "tool_call",
        // Fresh per call, as a provider's: a regenerated turn must not reuse the old tool call's id.
        id: `call_demo_${seed.slice(0, 12)}_${rounds}_${callNonce()}`,
        name: script.tool,
        args: argsFor(bound.get(script.tool)!, script.purpose, script.args(task)),
      },
    ];
  } else {
    content = finalAnswer(task, outcomes, bound);
  }

  const input = Math.ceil(inputTokens);
  const output = Math.ceil(estimateTokens(content) + toolCalls.reduce((sum, call) => sum + estimateTokens(JSON.stringify(call.args)), 0));
  return {
    id: `demo-${seed}`,
    content,
    toolCalls,
    finishReason: toolCalls.length > 0 ? "tool_calls" : "stop",
    usage: { input_tokens: input, output_tokens: output, total_tokens: input + output },
  };
}

function describeOutcome(outcome: ToolOutcome, position: number): string {
  const n = `${position}.`;
  if (outcome.failed) return `${n} The ${outcome.name} call failed. It said: "${quote(outcome.content, 300)}"`;
  if (outcome.name === "write_file") {
    const path = typeof outcome.args.path === "string" ? outcome.args.path : DEMO_NOTES_PATH;
    return `${n} I wrote ${path} with your request, its key terms and a three-step plan. write_file answered: "${quote(outcome.content, 300)}"`;
  }
  if (outcome.name === "bash") {
    const command = typeof outcome.args.command === "string" ? outcome.args.command : "a command";
    return `${n} I ran \`${command}\`. The output was:\n\n\`\`\`\n${quote(outcome.content)}\n\`\`\``;
  }
  if (outcome.name === "read_file") {
    const lines = outcome.content.split(/\r?\n/).length;
    return `${n} I read the notes back (${lines} lines). They begin:\n\n\`\`\`\n${quote(outcome.content, 300)}\n\`\`\``;
  }
  return `${n} ${outcome.name} returned: "${quote(outcome.content, 300)}"`;
}

function conclusionOf(outcomes: readonly ToolOutcome[]): string {
  const failed = outcomes.find((outcome) => outcome.failed);
  if (failed !== undefined) {
    return `I stopped there because ${failed.name} failed; fix the cause above and ask again.`;
  }
  const bash = outcomes.find((outcome) => outcome.name === "bash");
  const words = bash?.content.match(/^\s*(\d+)\s+\S*notes\.md/m)?.[1];
  if (words !== undefined) return `According to \`wc\`, the notes file holds ${words} words.`;
  return "The notes are in the workspace for you to open.";
}

function finalAnswer(task: string, outcomes: readonly ToolOutcome[], bound: ReadonlyMap<string, unknown>): string {
  if (task === "") {
    return `Tell me what to work on and I will take notes on it in ${DEMO_WORKSPACE}.\n\n${DEMO_FOOTER}`;
  }
  const title = titleOf(task);
  if (outcomes.length > 0) {
    const steps = outcomes.map((outcome, index) => describeOutcome(outcome, index + 1)).join("\n\n");
    return `Here is what I did for "${title}":\n\n${steps}\n\n${conclusionOf(outcomes)}\n\n${DEMO_FOOTER}`;
  }
  const terms = keyTermsOf(task);
  const termText = terms.length > 0 ? terms.join(", ") : "none that stand out";
  const why =
    bound.size === 0
      ? "No tools are available in this conversation, so I answer directly."
      : "None of the tools I know how to use (write_file, bash, read_file) are available, so I answer directly.";
  return [
    `You asked: "${oneLine(task, 300)}"`,
    "",
    why,
    `Key terms I noticed: ${termText}.`,
    `A plan would be: 1) pin down the goal, 2) collect what is needed about ${terms.slice(0, 2).join(" and ") || "the request"}, 3) draft the result and check it.`,
    "",
    DEMO_FOOTER,
  ].join("\n");
}
