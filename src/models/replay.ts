// The replay model: plays a recorded session (upstream DeerFlow's fixture format) so a real UI
// and a real gateway produce the same run with no provider and no key.
import type { CallbackManagerForLLMRun } from "@langchain/core/callbacks/manager";
import { BaseCallbackHandler } from "@langchain/core/callbacks/base";
import type { AIMessage, BaseMessage, ToolCall } from "@langchain/core/messages";
import { replayPromptKey, type RecordedTurn, type ReplayRecording } from "../config/replay-recording.ts";
import { estimateTokens } from "../core/tokens.ts";
import { ModelError } from "./errors.ts";
import { ScriptedChatModel, stableHash, type ScriptedChatModelFields, type ScriptedTurn } from "./scripted.ts";
import { isUserTurn, oneLine, textOf, userInputOf } from "./text.ts";

/** Set on every AIMessage of a replay model, so a UI or the CLI can label it as a recording. */
export const REPLAY_MODEL_MARKER = "deerflow_replay_model";
export const REPLAY_PROVIDER = "replay";
/** The caller of the agent's own model calls; other callers are named by the call's tags or run name. */
export const LEAD_CALLER = "lead_agent";

const CALLER_TAG_PREFIXES = ["middleware:", "subagent:"];
/** Run names that mean the same caller as a tag (the title middleware sets both). */
const CALLER_ALIASES: Readonly<Record<string, string>> = { title_agent: "middleware:title" };
/** How much of the recorded prompt a host call (title, suggestions) must quote to be about this session. */
const PROMPT_QUOTE_CHARS = 48;
const MAX_PENDING_CALLERS = 256;

/** One recording a replay model plays, and where it came from (the fixture path), named in every miss. */
export interface ReplaySource {
  readonly recording: ReplayRecording;
  readonly source: string;
}

export interface ReplayChatModelFields extends ScriptedChatModelFields {
  /** The recordings, each played for its own prompt (the turn's latest user message picks one). */
  readonly recordings: readonly ReplaySource[];
  /** The config's name of this model, named in every miss. */
  readonly modelName?: string;
}

interface KeyedRecording extends ReplaySource {
  /** The recording's prompt as a turn is matched against it. */
  readonly prompt: string;
}

/**
 * Who makes a model call, as upstream's recorder names it: a `lead_agent`, `middleware:*` or
 * `subagent:*` tag wins, else the run name when it is one of `callers` (`suggest_agent` ...; the
 * graph names its own steps too, "model" for the agent's call, which are not callers), else the
 * lead agent.
 */
export function replayCaller(tags: readonly string[] | undefined, runName: string | undefined, callers?: ReadonlySet<string>): string {
  const tag = tags?.find((t) => t === LEAD_CALLER || CALLER_TAG_PREFIXES.some((prefix) => t.startsWith(prefix)));
  if (tag !== undefined) return CALLER_ALIASES[tag] ?? tag;
  const name = CALLER_ALIASES[runName?.trim() ?? ""] ?? runName?.trim() ?? "";
  return name !== "" && (callers === undefined || callers.has(name)) ? name : LEAD_CALLER;
}

/** Text as the recording is matched: reminders and the input guard dropped, then the recording's prompt key. */
function normalized(text: string): string {
  return replayPromptKey(userInputOf(text.replace(/<system-reminder>[\s\S]*?<\/system-reminder>/g, "")));
}

/** Remembers each model call's caller at its start, where the run name is still known. */
class CallerCapture extends BaseCallbackHandler {
  readonly name = "deerflow_replay_caller";
  constructor(
    private readonly callers: Map<string, string>,
    private readonly recorded: ReadonlySet<string>,
  ) {
    super();
    // Synchronously, so the caller is known before the call itself looks for it.
    this.awaitHandlers = true;
  }

  override handleChatModelStart(
    _llm: unknown,
    _messages: unknown,
    runId: string,
    _parentRunId?: string,
    _extraParams?: Record<string, unknown>,
    tags?: string[],
    _metadata?: Record<string, unknown>,
    runName?: string,
  ): void {
    // A call that never reached the model (aborted first) leaves its entry; keep the map small.
    if (this.callers.size >= MAX_PENDING_CALLERS) this.callers.delete(this.callers.keys().next().value!);
    this.callers.set(runId, replayCaller(tags, runName, this.recorded));
  }
}

/**
 * Answers each call with the recorded output for its caller, keyed by the prompt: the recording
 * whose prompt is the turn's latest user message plays (so a thread's second message can play
 * another recording), and the agent's n-th call after that prompt gets its n-th lead_agent turn, so the recorded
 * tool calls go to the real tools; a host call (title, suggestions) that quotes the prompt gets its
 * caller's recorded answer. Anything else fails the call with a ModelError `replay_miss` naming
 * the prompt and the fixture, never a made-up answer.
 */
export class ReplayChatModel extends ScriptedChatModel {
  protected readonly marker: string = REPLAY_MODEL_MARKER;
  protected readonly reportedModelName: string;
  readonly recordings: readonly ReplaySource[];
  readonly #modelName: string;
  readonly #keyed: readonly KeyedRecording[];
  readonly #callers: Map<string, string>;

  static override lc_name(): string {
    return "ReplayChatModel";
  }

  constructor(fields: ReplayChatModelFields) {
    const { recordings, modelName, ...rest } = fields;
    const callers = new Map<string, string>();
    const recorded = new Set(recordings.flatMap(({ recording }) => recording.turns.map((turn) => turn.caller)));
    super({ ...rest, callbacks: [new CallerCapture(callers, recorded), ...(Array.isArray(rest.callbacks) ? rest.callbacks : [])] });
    this.#callers = callers;
    this.recordings = recordings;
    this.#modelName = modelName ?? REPLAY_PROVIDER;
    this.#keyed = recordings.map((entry) => ({ ...entry, prompt: normalized(entry.recording.prompt) }));
    const first = recordings[0]?.recording;
    if (first === undefined) throw new ModelError(`Replay model "${this.#modelName}" has no recording to play`, { code: "replay_not_loaded" });
    this.reportedModelName = `${REPLAY_PROVIDER}:${first.scenario ?? first.model ?? "recording"}`;
  }

  _llmType(): string {
    return REPLAY_PROVIDER;
  }

  protected planTurn(messages: BaseMessage[], _options: this["ParsedCallOptions"], runManager?: CallbackManagerForLLMRun): ScriptedTurn {
    const caller = this.#callerOf(runManager);
    if (caller === LEAD_CALLER || caller.startsWith("subagent:")) return this.#agentTurn(messages, caller);
    return this.#hostTurn(messages, caller);
  }

  #callerOf(runManager: CallbackManagerForLLMRun | undefined): string {
    if (runManager === undefined) return LEAD_CALLER;
    const captured = this.#callers.get(runManager.runId);
    this.#callers.delete(runManager.runId);
    return captured ?? replayCaller((runManager as unknown as { tags?: string[] }).tags, undefined);
  }

  #turnsOf(keyed: KeyedRecording, caller: string): RecordedTurn[] {
    return keyed.recording.turns.filter((turn) => turn.caller === caller);
  }

  /** The agent's own call: the latest user turn must be the recorded prompt (subagents: their task). */
  #agentTurn(messages: BaseMessage[], caller: string): ScriptedTurn {
    const userIndex = this.#promptIndex(messages);
    const said = userIndex >= 0 ? normalized(textOf(messages[userIndex]!.content)) : "";
    // A subagent's task is its own prompt: it plays the first recording with that subagent's calls.
    const keyed =
      this.#keyed.find((entry) => entry.prompt === said) ??
      (caller === LEAD_CALLER ? undefined : (this.#keyed.find((entry) => this.#turnsOf(entry, caller).length > 0) ?? this.#keyed[0]));
    if (keyed === undefined) {
      throw this.#miss(
        said === "" ? "a conversation with no user message" : `the prompt "${oneLine(said, 60)}"`,
        "send a recorded prompt, or record a fixture for this one",
      );
    }
    const step = messages.slice(userIndex + 1).filter((message) => message.type === "ai").length;
    const turns = this.#turnsOf(keyed, caller);
    const turn = turns[step];
    if (turn === undefined) {
      throw this.#miss(
        `call ${step + 1} of ${caller} after the prompt "${oneLine(said, 60)}" (the recording has ${turns.length})`,
        "the run went past the recording; re-record the fixture",
        keyed,
      );
    }
    return this.#play(turn, messages, `${caller}:${step}`);
  }

  /**
   * Where the turn's prompt is: the latest user turn, unless the latest human message is hidden
   * from the UI and is itself a recorded prompt. A client may send its own words hidden (DeerFlow's
   * UI sends "Save agent" that way), while the middlewares' hidden reminders never match a recording.
   */
  #promptIndex(messages: readonly BaseMessage[]): number {
    const latestHuman = messages.findLastIndex((message) => message.type === "human" && message.additional_kwargs?.deerflow_content_kind === undefined);
    if (latestHuman >= 0 && !isUserTurn(messages[latestHuman]!)) {
      const text = normalized(textOf(messages[latestHuman]!.content));
      if (this.#keyed.some((entry) => entry.prompt === text)) return latestHuman;
    }
    return messages.findLastIndex(isUserTurn);
  }

  /** A host call (title, suggestions ...): answered when it is about the recorded prompt. */
  #hostTurn(messages: BaseMessage[], caller: string): ScriptedTurn {
    const texts = messages.map((message) => normalized(textOf(message.content)));
    const about = this.#keyed.filter((entry) => texts.some((text) => text.includes(entry.prompt.slice(0, PROMPT_QUOTE_CHARS))));
    // The call is about the recordings it quotes; the first of them that recorded this caller answers.
    const keyed = about.find((entry) => this.#turnsOf(entry, caller).length > 0) ?? about[0];
    const turn = keyed === undefined ? undefined : this.#turnsOf(keyed, caller)[0];
    if (keyed === undefined || turn === undefined) {
      const first = messages.find(isUserTurn) ?? messages[0];
      const seen = first === undefined ? "" : normalized(textOf(first.content));
      throw this.#miss(
        `the ${caller} call about "${oneLine(seen, 60)}"${keyed !== undefined ? ` (the recording has no ${caller} call)` : ""}`,
        keyed !== undefined ? "record a fixture with this call, or leave this call off in config" : "send a recorded prompt first",
        keyed,
      );
    }
    return this.#play(turn, messages, `${caller}:0`);
  }

  #play(turn: RecordedTurn, messages: readonly BaseMessage[], position: string): ScriptedTurn {
    const data = turn.output.data;
    const content = typeof data.content === "string" ? data.content : textOf(data.content as Parameters<typeof textOf>[0]);
    const seen = new Set<string>();
    for (const message of messages) {
      if (message.type === "ai") for (const call of (message as AIMessage).tool_calls ?? []) if (call.id) seen.add(call.id);
    }
    const seed = stableHash(`${position}\u0000${messages.map((m) => `${m.type}\u0001${textOf(m.content)}`).join("\u0000")}`);
    const toolCalls: ToolCall[] = (data.tool_calls ?? []).map((call, index) => {
      // A recorded id said again in this thread (the prompt replayed twice) gets a fresh suffix.
      const recorded = call.id ?? `call_replay_${seed.slice(0, 12)}_${index}`;
      const id = seen.has(recorded) ? `${recorded}_${seed.slice(0, 8)}` : recorded;
      return { type: "tool_call", id, name: call.name, args: call.args };
    });
    const usage = data.usage_metadata ?? estimatedUsage(messages, content);
    return {
      id: `replay-${seed}`,
      content,
      toolCalls,
      finishReason: toolCalls.length > 0 ? "tool_calls" : "stop",
      usage: { input_tokens: usage.input_tokens, output_tokens: usage.output_tokens, total_tokens: usage.total_tokens },
    };
  }

  /** A replay_miss naming the fixture(s) looked in and the prompt(s) they record. */
  #miss(what: string, next: string, keyed?: ReplaySource): ModelError {
    const looked = keyed === undefined ? this.recordings : [keyed];
    const where = looked.map((entry) => entry.source).join(", ");
    const prompts = looked.map((entry) => `"${oneLine(entry.recording.prompt, 60)}"`).join(", ");
    return new ModelError(
      `Replay model "${this.#modelName}" has no recorded answer for ${what} in ${where} ` +
        `(it records the prompt${looked.length > 1 ? "s" : ""} ${prompts}); ${next}.`,
      { code: "replay_miss" },
    );
  }
}

function estimatedUsage(messages: readonly BaseMessage[], content: string): { input_tokens: number; output_tokens: number; total_tokens: number } {
  const input = Math.ceil(messages.reduce((sum, m) => sum + estimateTokens(textOf(m.content)), 0));
  const output = Math.ceil(estimateTokens(content));
  return { input_tokens: input, output_tokens: output, total_tokens: input + output };
}
