import * as v from "valibot";
import type { Assert, SameType } from "../core/types.ts";
import { ConfigError } from "./errors.ts";
import { describeIssue } from "./issues.ts";

/*
 * A recorded session for `use: replay`, in upstream DeerFlow's fixture format
 * (backend/tests/fixtures/replay/*.json): the prompt it was recorded with and the model calls it
 * made, each with its caller (lead_agent, middleware:title, suggest_agent ...) and the AI message
 * the call returned. Keys this harness does not read (hashes, provider metadata) are accepted and
 * dropped.
 */

const text = v.pipe(
  v.string(),
  v.minLength(1, () => 'expected a non-empty string, got ""'),
);

const tokenCount = v.pipe(
  v.number(),
  v.integer((issue) => `expected a whole number, got ${issue.received}`),
  v.minValue(0, (issue) => `expected a number >= 0, got ${issue.received}`),
);

const RecordedToolCallSchema = v.object({
  name: text,
  args: v.record(v.string(), v.unknown()),
  id: v.nullish(v.string()),
});

const RecordedUsageSchema = v.object({
  input_tokens: tokenCount,
  output_tokens: tokenCount,
  total_tokens: tokenCount,
});

const RecordedMessageSchema = v.object({
  type: v.literal("ai", (issue) => `expected "ai" (every recorded output is an AI message), got ${issue.received}`),
  data: v.object({
    content: v.union([v.string(), v.array(v.unknown())]),
    tool_calls: v.nullish(v.array(RecordedToolCallSchema)),
    id: v.nullish(v.string()),
    response_metadata: v.nullish(v.object({ finish_reason: v.nullish(v.string()) })),
    usage_metadata: v.nullish(RecordedUsageSchema),
  }),
});

const RecordedTurnSchema = v.object({
  /** Who made the call: lead_agent (the default), middleware:title, suggest_agent, subagent:<name> ... */
  caller: v.optional(text, "lead_agent"),
  output: RecordedMessageSchema,
});

export const ReplayRecordingSchema = v.object({
  scenario: v.nullish(v.string()),
  mode: v.nullish(v.string()),
  /** The provider model the session was recorded with; shown, never called. */
  model: v.nullish(v.string()),
  /** The user's prompt the session answers: the replay model plays it for this prompt only. */
  prompt: text,
  turns: v.pipe(
    v.array(RecordedTurnSchema),
    v.minLength(1, () => "expected at least one recorded turn, got an empty list"),
  ),
});

/** A recorded tool call: the real tool runs it when the turn is played. */
export interface RecordedToolCall {
  name: string;
  args: { [key: string]: unknown };
  id?: string | null | undefined;
}
export interface RecordedUsage {
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
}
/** The AI message one model call returned, as LangChain's message_to_dict writes it. */
export interface RecordedMessage {
  type: "ai";
  data: {
    content: string | unknown[];
    tool_calls?: RecordedToolCall[] | null | undefined;
    id?: string | null | undefined;
    response_metadata?: { finish_reason?: string | null | undefined } | null | undefined;
    usage_metadata?: RecordedUsage | null | undefined;
  };
}
export interface RecordedTurn {
  caller: string;
  output: RecordedMessage;
}
export interface ReplayRecording {
  scenario?: string | null | undefined;
  mode?: string | null | undefined;
  model?: string | null | undefined;
  prompt: string;
  turns: RecordedTurn[];
}
/** A recording as written: a turn's caller may be left out (lead_agent). */
export interface ReplayRecordingInput extends Omit<ReplayRecording, "turns"> {
  turns: RecordedTurnInput[];
}
export interface RecordedTurnInput {
  caller?: string | undefined;
  output: RecordedMessage;
}
type _RecordingMatches = Assert<SameType<ReplayRecording, v.InferOutput<typeof ReplayRecordingSchema>>>;
type _RecordingInputMatches = Assert<SameType<ReplayRecordingInput, v.InferInput<typeof ReplayRecordingSchema>>>;

/** Parses a fixture file's text; throws ConfigError naming the file and the first bad field (`turns[2].output.type`). */
export function parseReplayRecording(source: string, fileName: string): ReplayRecording {
  let value: unknown;
  try {
    value = JSON.parse(source);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new ConfigError("config_invalid", fileName, [{ path: "", message: `not valid JSON: ${reason}` }], { cause: error });
  }
  const result = v.safeParse(ReplayRecordingSchema, value);
  if (!result.success) {
    throw new ConfigError(
      "config_invalid",
      fileName,
      result.issues.map((issue) => describeIssue(issue, ReplayRecordingSchema, fileName)),
    );
  }
  return result.output;
}

/**
 * The key a recording is played for: its prompt with whitespace collapsed. The replay model reads
 * a turn's latest user message through the same key (after dropping reminders and the input guard).
 */
export function replayPromptKey(prompt: string): string {
  return prompt.replace(/\s+/g, " ").trim();
}

/** The first pair of recordings (by index) that share a prompt key, or undefined when each prompt is its own. */
export function samePromptRecordings(recordings: readonly Pick<ReplayRecording, "prompt">[]): [number, number] | undefined {
  const first = new Map<string, number>();
  for (const [index, recording] of recordings.entries()) {
    const key = replayPromptKey(recording.prompt);
    const earlier = first.get(key);
    if (earlier !== undefined) return [earlier, index];
    first.set(key, index);
  }
  return undefined;
}
