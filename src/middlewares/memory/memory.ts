import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { BaseMessage } from "@langchain/core/messages";
import { contentText } from "../../core/content.ts";
import { DeerflowError } from "../../core/errors.ts";
import { runThreadId } from "../../engine/run-identity.ts";
import type { AgentMiddleware, AgentRuntime, AgentState, HookResult } from "../../engine/types.ts";
import type { KeyValue } from "../../ports/key-value.ts";
import { parseMiddlewareConfig } from "../../engine/middleware-config.ts";
import { ORIGINAL_USER_CONTENT_KEY, USER_CONTENT_TEXT } from "../input-sanitization.ts";
import { MemoryConfigSchema, type MemoryConfig, type MemoryConfigInput } from "./config.ts";
import {
  createMemoryStore,
  memoryStorePolicy,
  requireNamedModel,
  selectMemoryExtractor,
  type MemoryExtractor,
  type MemoryMessage,
  type MemoryStore,
  type MemoryStoreOptions,
} from "./store.ts";
import { ERROR_FALLBACK_KEY } from "../llm-error-handling/index.ts";
import { isRealUserMessage, messageText } from "../messages.ts";
import { resolveUserId } from "../thread-data.ts";

/*
 * Hands each finished run's conversation to the memory updater. The run never waits for it: the
 * store debounces and extracts later. Only what the user said and the final answers go in: tool
 * traffic and framework-injected hidden messages (reminders, the recalled memory itself, which
 * would otherwise feed back into memory) stay out.
 */

export const MEMORY_NAME = "Memory";
export { MemoryConfigSchema, type MemoryConfig, type MemoryConfigInput } from "./config.ts";

const UPLOAD_BLOCK = /<(uploaded_files|current_uploads)>[\s\S]*?<\/\1>\n*/gi;

export interface MemoryMiddlewareDeps {
  /**
   * A process-wide store shared with DynamicContext and drained on shutdown. Without one, the
   * middleware creates a store per storage port it meets (runtime.services.storage) and owns it.
   */
  readonly store?: MemoryStore;
  /** The model named by memory.model_name (only without `store`; a store brings its own). */
  readonly model?: BaseChatModel;
  readonly extractor?: MemoryExtractor;
  readonly onError?: MemoryStoreOptions["onError"];
  /** Observes the model-backed extractor's calls (only without `store`; a store brings its own). */
  readonly observeSystemCall?: MemoryStoreOptions["observeSystemCall"];
}

export interface MemoryMiddleware extends AgentMiddleware {
  /** Processes every waiting update of the stores this middleware writes to. */
  flush(): Promise<void>;
  /** Drains and closes the stores this middleware created (a given store belongs to its creator). */
  close(): Promise<boolean>;
}

/**
 * A conversation as memory sees it: real user turns (the user's own text, without server-added
 * upload listings) and final answers (no tool calls, no error fallback). An upload-only turn
 * carries no user text, and the answer to it is about the files, so both are skipped.
 */
export function filterMessagesForMemory(messages: readonly BaseMessage[]): MemoryMessage[] {
  const kept: MemoryMessage[] = [];
  let skipNextAnswer = false;
  for (const message of messages) {
    if (message.type === "human") {
      if (!isRealUserMessage(message)) continue;
      const original = message.additional_kwargs?.[ORIGINAL_USER_CONTENT_KEY];
      const text = (typeof original === "string" ? original : contentText(message.content, USER_CONTENT_TEXT).replace(UPLOAD_BLOCK, "")).trim();
      if (text === "") {
        skipNextAnswer = true;
        continue;
      }
      kept.push({ ...(message.id ? { id: message.id } : {}), role: "user", text });
      skipNextAnswer = false;
    } else if (message.type === "ai") {
      const toolCalls = (message as { tool_calls?: unknown[] }).tool_calls;
      if (Array.isArray(toolCalls) && toolCalls.length > 0) continue;
      if (message.additional_kwargs?.[ERROR_FALLBACK_KEY] === true) continue;
      if (skipNextAnswer) {
        skipNextAnswer = false;
        continue;
      }
      const text = messageText(message).trim();
      if (text !== "") kept.push({ ...(message.id ? { id: message.id } : {}), role: "assistant", text });
    }
  }
  return kept;
}

// Keys that shape the store; a given store must have been built from the same section.
const STORE_KEYS = ["debounce_seconds", "max_facts", "fact_confidence_threshold", "model_name", "shutdown_flush_timeout_seconds"] as const;

function checkGivenStore(settings: MemoryConfig, deps: MemoryMiddlewareDeps): void {
  const store = deps.store!;
  if (deps.model || deps.extractor || deps.onError || deps.observeSystemCall) {
    throw new DeerflowError(
      "memory_store_conflict",
      "Memory was given a store and also a model, extractor, onError or observeSystemCall; pass those to createMemoryStore instead, which owns them.",
    );
  }
  const differing = STORE_KEYS.filter((key) => store.settings[key] !== settings[key]);
  if (differing.length > 0) {
    throw new DeerflowError(
      "memory_store_conflict",
      `Memory's config and its store disagree on ${differing.join(", ")}; create the store from the same memory section.`,
    );
  }
}

/**
 * Queues each run's conversation for the memory updater, per runtime-resolved user
 * (context.user_id, else "default") and thread. Lead agent only, and only in `middleware` mode.
 */
export function createMemoryMiddleware(config?: MemoryConfigInput, deps: MemoryMiddlewareDeps = {}): MemoryMiddleware {
  const settings = parseMiddlewareConfig(MemoryConfigSchema, config, MEMORY_NAME);
  if (deps.store) checkGivenStore(settings, deps);
  else requireNamedModel(settings, deps);
  const extractor = deps.store?.extractor ?? selectMemoryExtractor(deps, settings);
  const owned = new Map<KeyValue, MemoryStore>();

  function storeFor(runtime: AgentRuntime): MemoryStore | undefined {
    if (deps.store) return deps.store;
    const storage = runtime.services.storage;
    // No storage port, nowhere to remember: the run is unaffected.
    if (!storage) return undefined;
    let store = owned.get(storage);
    if (!store) {
      store = createMemoryStore(storage, runtime.services.clock, {
        config: settings,
        extractor,
        ...(runtime.services.versioned ? { versioned: runtime.services.versioned } : {}),
        ...(deps.onError ? { onError: deps.onError } : {}),
      });
      owned.set(storage, store);
    }
    return store;
  }

  return {
    name: MEMORY_NAME,
    afterAgent(state: AgentState, runtime: AgentRuntime): HookResult {
      if (!settings.enabled) return;
      const threadId = runThreadId(runtime);
      if (threadId === undefined) return;
      const messages = filterMessagesForMemory(state.messages);
      if (messages.length === 0) return;
      const store = storeFor(runtime);
      if (!store) return;
      store.enqueue({ userId: resolveUserId(runtime), threadId, messages });
    },
    async flush() {
      await Promise.all([...(deps.store ? [deps.store] : []), ...owned.values()].map((store) => store.flush()));
    },
    async close() {
      const results = await Promise.all([...owned.values()].map((store) => store.close()));
      return results.every(Boolean);
    },
    releasePolicyParameters() {
      return { enabled: settings.enabled, mode: settings.mode, ...memoryStorePolicy(settings, extractor) };
    },
  };
}
