import type { BaseMessage } from "@langchain/core/messages";
import { Annotation, type AnnotationRoot, type BaseChannel, type Messages, type OverwriteValue } from "@langchain/langgraph/web";
import { StateUpdateError } from "./errors.ts";
import {
  lastValue,
  reduceArtifacts,
  reduceDelegations,
  reduceGoal,
  reduceMessages,
  reducePromoted,
  reduceSandbox,
  reduceSkillContext,
  reduceTodos,
  reduceViewedImages,
} from "./reducers.ts";
import type {
  Delegation,
  DelegationUpdate,
  Promoted,
  SandboxState,
  SkillContextEntry,
  SkillContextInput,
  ThreadDataState,
  Todo,
  UploadedFile,
  ViewedImage,
} from "./types.ts";

export { StateConflictError, StateUpdateError, type StateUpdateErrorCode } from "./errors.ts";
export {
  CLEAR_GOAL,
  isClearGoal,
  DELEGATION_STATUSES,
  MAX_DELEGATIONS,
  MAX_SKILL_CONTEXT_ENTRIES,
  MAX_SKILL_DESCRIPTION_CHARS,
  lastValue,
  reduceArtifacts,
  reduceDelegations,
  reduceGoal,
  reduceMessages,
  reducePromoted,
  reduceSandbox,
  reduceSkillContext,
  reduceTodos,
  reduceViewedImages,
} from "./reducers.ts";
export type {
  Delegation,
  DelegationStatus,
  DelegationStopReason,
  DelegationUpdate,
  Promoted,
  SandboxState,
  SkillContextEntry,
  SkillContextInput,
  ThreadDataState,
  Todo,
  TodoStatus,
  UploadedFile,
  ViewedImage,
} from "./types.ts";

/** Everything a lead-agent thread keeps between steps and runs. */
export interface ThreadState {
  messages: BaseMessage[];
  sandbox: SandboxState | null;
  thread_data: ThreadDataState | null;
  title: string | null;
  uploaded_files: UploadedFile[] | null;
  summary_text: string | null;
  background_tasks: Record<string, unknown> | null;
  artifacts: string[];
  todos: Todo[] | null;
  goal: Record<string, unknown> | null;
  viewed_images: Record<string, ViewedImage>;
  promoted: Promoted | null;
  delegations: Delegation[];
  skill_context: SkillContextEntry[];
}

/** What a writer may send to each channel; its reducer folds it into the stored value. */
export interface ThreadStateChannelUpdates {
  messages: Messages;
  sandbox: SandboxState | null;
  thread_data: ThreadDataState | null;
  title: string | null;
  uploaded_files: UploadedFile[] | null;
  summary_text: string | null;
  background_tasks: Record<string, unknown> | null;
  artifacts: readonly string[] | null;
  todos: readonly Todo[] | null;
  goal: Record<string, unknown> | null;
  viewed_images: Readonly<Record<string, ViewedImage>> | null;
  promoted: Readonly<Promoted> | null;
  delegations: readonly DelegationUpdate[] | null;
  skill_context: readonly SkillContextInput[] | null;
}

/** A partial update: a missing or `undefined` key leaves its channel untouched. */
export type ThreadStateUpdate = { [K in keyof ThreadState]?: ThreadStateChannelUpdates[K] };

export interface ThreadStateChannel<Value, Update> {
  readonly reducer: (left: Value, right: Update | undefined) => Value;
  readonly default: () => Value;
}

export type ThreadStateChannels = {
  readonly [K in keyof ThreadState]: ThreadStateChannel<ThreadState[K], ThreadStateChannelUpdates[K]>;
};

const lastValueDefaultNull = <T>(): ThreadStateChannel<T | null, T | null> => ({ reducer: lastValue, default: () => null });

/**
 * The one definition of every channel. The LangGraph annotation and applyStateUpdate are both
 * built from it, so a graph step and an in-memory fold cannot drift apart.
 */
export const threadStateChannels: ThreadStateChannels = Object.freeze({
  messages: { reducer: reduceMessages, default: () => [] },
  sandbox: { reducer: reduceSandbox, default: () => null },
  thread_data: lastValueDefaultNull<ThreadDataState>(),
  title: lastValueDefaultNull<string>(),
  uploaded_files: lastValueDefaultNull<UploadedFile[]>(),
  summary_text: lastValueDefaultNull<string>(),
  background_tasks: lastValueDefaultNull<Record<string, unknown>>(),
  artifacts: { reducer: reduceArtifacts, default: () => [] },
  todos: { reducer: reduceTodos, default: () => null },
  goal: { reducer: reduceGoal, default: () => null },
  viewed_images: { reducer: reduceViewedImages, default: () => ({}) },
  promoted: { reducer: reducePromoted, default: () => null },
  delegations: { reducer: reduceDelegations, default: () => [] },
  skill_context: { reducer: reduceSkillContext, default: () => [] },
});

const channelNames = Object.freeze(Object.keys(threadStateChannels)) as readonly (keyof ThreadState)[];

/** The LangGraph channel of one ThreadState key: its value, and what an update to it may be. */
export type ThreadStateGraphChannel<K extends keyof ThreadState> = BaseChannel<ThreadState[K], OverwriteValue<ThreadState[K]> | ThreadStateChannelUpdates[K] | undefined>;

function annotate<K extends keyof ThreadState>(key: K): ThreadStateGraphChannel<K> {
  const channel = threadStateChannels[key];
  return Annotation<ThreadState[K], ThreadStateChannelUpdates[K] | undefined>({
    reducer: channel.reducer,
    default: channel.default,
  });
}

export const ThreadStateAnnotation: AnnotationRoot<{ [K in keyof ThreadState]: ThreadStateGraphChannel<K> }> = Annotation.Root({
  messages: annotate("messages"),
  sandbox: annotate("sandbox"),
  thread_data: annotate("thread_data"),
  title: annotate("title"),
  uploaded_files: annotate("uploaded_files"),
  summary_text: annotate("summary_text"),
  background_tasks: annotate("background_tasks"),
  artifacts: annotate("artifacts"),
  todos: annotate("todos"),
  goal: annotate("goal"),
  viewed_images: annotate("viewed_images"),
  promoted: annotate("promoted"),
  delegations: annotate("delegations"),
  skill_context: annotate("skill_context"),
});

export function emptyThreadState(): ThreadState {
  return Object.fromEntries(channelNames.map((key) => [key, threadStateChannels[key].default()])) as unknown as ThreadState;
}

function isChannelName(key: string): key is keyof ThreadState {
  return Object.hasOwn(threadStateChannels, key);
}

// Mirrors LangGraph's Overwrite detection (instance, wire form, and the JSON form a Python client
// sends) so a value that bypasses the reducer in a graph step bypasses it here too.
function overwriteValue(value: unknown): [true, unknown] | [false] {
  if (typeof value !== "object" || value === null) return [false];
  if ("__overwrite__" in value) return [true, (value as { __overwrite__: unknown }).__overwrite__];
  const record = value as { type?: unknown; value?: unknown };
  if (record.type === "__overwrite__" && "value" in record) return [true, record.value];
  return [false];
}

/**
 * Folds one update into a state the way a graph step folds one node's writes: each present key
 * goes through its channel's reducer, untouched channels keep their reference, nothing is mutated.
 */
export function applyStateUpdate(state: ThreadState, update: ThreadStateUpdate): ThreadState {
  const keys = Object.keys(update);
  for (const key of keys) {
    if (!isChannelName(key)) {
      throw new StateUpdateError(
        "unknown_channel",
        `State update names an unknown channel '${key}'. ThreadState channels are: ${channelNames.join(", ")}.`,
        { channel: key },
      );
    }
  }
  if (keys.length === 0) return state;
  const next: Record<string, unknown> = { ...state };
  for (const key of keys as (keyof ThreadState)[]) {
    const value: unknown = update[key];
    const [isOverwrite, replacement] = overwriteValue(value);
    const reducer = threadStateChannels[key].reducer as (left: unknown, right: unknown) => unknown;
    next[key] = isOverwrite ? replacement : reducer(next[key], value);
  }
  return next as unknown as ThreadState;
}
