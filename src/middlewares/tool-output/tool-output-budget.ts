import { ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { isCommand, isGraphBubbleUp } from "@langchain/langgraph/web";
import type { Command } from "@langchain/langgraph/web";
import * as v from "valibot";
import type { Assert, SameType } from "../../core/types.ts";
import type {
  AgentMiddleware,
  AgentRuntime,
  ModelHandler,
  ModelRequest,
  ToolCallRequest,
  ToolHandler,
  ToolResult,
} from "../../engine/types.ts";
import { VIRTUAL_DIRS, type Sandbox } from "../../ports/sandbox.ts";
import { TOOL_RESULTS_DIRNAME, isToolResultArtifact } from "../../core/path.ts";
import { acquireRunSandbox, type SandboxAuthorizer } from "../../sandbox/acquire.ts";
import { parseMiddlewareConfig } from "../../engine/middleware-config.ts";
import { renderToolOutputPreview } from "./synopsis.ts";
import { PyText, codePointLength } from "./text.ts";
import { ToolTransform, mapToolResultMessages, replaceToolContent, type ToolTransformEntry } from "../tool-transform-meta.ts";

/*
 * One oversized tool result (a 2 MB log, a whole web page) can push everything else out of the
 * model's context. A result over the budget is written in full to a file under the thread's
 * outputs folder and replaced by a typed synopsis plus a read_file reference, so the model still
 * knows what came back and can read the part it needs. Without writable storage the result is cut
 * to head + tail instead, but only past a larger limit: between the two limits an output stays
 * whole when it cannot be saved. The files are process feedback, not deliverables, so whoever
 * lists produced artifacts skips them (isToolResultArtifact).
 */

export const TOOL_OUTPUT_BUDGET_NAME = "ToolOutputBudget";

// The storage folder's default name and the rule that recognises its files live in core, shared
// with present_files and the workspace-changes scan.
export { TOOL_RESULTS_DIRNAME, isToolResultArtifact };

/** Output of these tools is saved as .log (it is a log); everything else as .txt. */
const LOG_EXTENSION_TOOLS: ReadonlySet<string> = new Set(["bash", "bash_tool", "web_fetch"]);

function isSingleSegment(value: string): boolean {
  return value !== "" && value !== "." && !value.includes("..") && !/[/\\\0]/.test(value);
}

const size = (fallback: number) => v.optional(v.pipe(v.number(), v.integer(), v.minValue(0)), fallback);

export const ToolOutputBudgetConfigSchema = v.strictObject({
  enabled: v.optional(v.boolean(), true),
  /** Longer outputs are externalised when storage is available; 0 never externalises. */
  externalize_min_chars: size(12_000),
  /** Raw head sample kept in an externalised result's preview. */
  preview_head_chars: size(2_000),
  /** Raw tail sample kept in an externalised result's preview. */
  preview_tail_chars: size(1_000),
  /** Longer outputs that could not be externalised are cut to this; 0 never cuts. */
  fallback_max_chars: size(30_000),
  fallback_head_chars: size(8_000),
  fallback_tail_chars: size(3_000),
  /**
   * One folder name under the outputs dir. A single segment, because artifact listings skip it by
   * folder name; a nested path would silently count its files as deliverables again.
   */
  storage_subdir: v.optional(
    v.pipe(
      v.string(),
      v.check(isSingleSegment, `storage_subdir must be one folder name such as "${TOOL_RESULTS_DIRNAME}" (no "/", "\\" or "..")`),
    ),
    TOOL_RESULTS_DIRNAME,
  ),
  /** Never budgeted: budgeting read_file would loop (save, read back, save again). */
  exempt_tools: v.optional(v.array(v.string()), () => ["read_file", "read_file_tool"]),
  /** Per-tool externalize_min_chars; 0 never externalises that tool (fallback truncation still applies). */
  tool_overrides: v.optional(v.record(v.string(), v.pipe(v.number(), v.integer(), v.minValue(0))), () => ({})),
});
export interface ToolOutputBudgetConfig {
  enabled: boolean;
  externalize_min_chars: number;
  preview_head_chars: number;
  preview_tail_chars: number;
  fallback_max_chars: number;
  fallback_head_chars: number;
  fallback_tail_chars: number;
  storage_subdir: string;
  exempt_tools: string[];
  tool_overrides: Record<string, number>;
}
type _ToolOutputBudgetConfigMatches = Assert<SameType<ToolOutputBudgetConfig, v.InferOutput<typeof ToolOutputBudgetConfigSchema>>>;

// ---------------------------------------------------------------------------------------------
// Text

/**
 * The text of a result, or null when it is not all text (images and other blocks are never
 * budgeted: cutting them would corrupt them).
 */
export function toolResultText(content: unknown): string | null {
  if (typeof content === "string") return content;
  if (!Array.isArray(content) || content.length === 0) return null;
  const parts: string[] = [];
  for (const part of content) {
    if (typeof part === "string") parts.push(part);
    else if (typeof part === "object" && part !== null && typeof (part as { text?: unknown }).text === "string") {
      parts.push((part as { text: string }).text);
    } else return null;
  }
  return parts.join("\n");
}

/** An end offset moved back to just after a line break, when one lies in the second half before it. */
function snapEnd(text: PyText, pos: number): number {
  if (pos <= 0 || pos >= text.length) return pos;
  const newline = text.rfind("\n", Math.floor(pos / 2), pos);
  return newline >= 0 ? newline + 1 : pos;
}

/** A start offset moved forward to just after a line break (moving it back would lengthen the slice). */
function snapStart(text: PyText, pos: number): number {
  if (pos <= 0 || pos >= text.length) return pos;
  const newline = text.find("\n", pos, pos + Math.floor((text.length - pos) / 2));
  return newline >= 0 ? newline + 1 : pos;
}

function omittedMarker(omitted: number, toolName: string): string {
  return (
    `\n\n[... ${omitted} chars omitted from ${toolName} output. Persistent storage unavailable. ` +
    "Consider narrowing the query or using more specific parameters.]\n\n"
  );
}

/** Head + omission marker + tail, never longer than `maxChars` code points. */
export function buildFallback(content: string, toolName: string, maxChars: number, headChars: number, tailChars: number): string {
  const text = PyText.of(content);
  const total = text.length;
  if (maxChars <= 0 || total <= maxChars) return content;
  // Sized with the total, which has at least as many digits as the final omitted count.
  const overhead = codePointLength(omittedMarker(total, toolName));
  if (overhead >= maxChars) return text.head(maxChars);
  const budget = maxChars - overhead;
  const head = Math.min(headChars, budget);
  const tail = Math.min(tailChars, Math.max(0, budget - head));
  const headEnd = snapEnd(text, Math.min(head, total));
  const tailStart = snapStart(text, Math.max(headEnd, total - tail));
  const tailText = tailStart < total ? text.slice(tailStart) : "";
  const omitted = total - headEnd - (tailStart < total ? total - tailStart : 0);
  return `${text.slice(0, headEnd)}${omittedMarker(omitted, toolName)}${tailText}`;
}

// ---------------------------------------------------------------------------------------------
// Storage

function safeFileStem(toolName: string): string {
  const base = toolName.slice(toolName.lastIndexOf("/") + 1);
  return base.replaceAll("..", "").replaceAll("/", "_").replaceAll("\\", "_") || "unknown";
}

/** `<tool>-<12 hex>.<log|txt>` */
export function externalizedFileName(toolName: string): string {
  const id = crypto.randomUUID().replaceAll("-", "").slice(0, 12);
  return `${safeFileStem(toolName)}-${id}.${LOG_EXTENSION_TOOLS.has(toolName) ? "log" : "txt"}`;
}

function rethrowIfControlFlow(error: unknown, runtime: AgentRuntime): void {
  if (isGraphBubbleUp(error) || runtime.signal?.aborted) throw error;
}

/**
 * Writes the full output into the sandbox and returns its virtual path, or null when it did not
 * verifiably land (the model must never be handed a path read_file cannot read).
 */
async function externalize(
  sandbox: Sandbox,
  content: string,
  toolName: string,
  storageSubdir: string,
  runtime: AgentRuntime,
): Promise<string | null> {
  if (!isSingleSegment(storageSubdir)) return null;
  const dir = `${VIRTUAL_DIRS.outputs}/${storageSubdir}`;
  const path = `${dir}/${externalizedFileName(toolName)}`;
  try {
    await sandbox.writeFile(path, content);
    const entry = (await sandbox.list(dir, { depth: 1 })).find((item) => item.path === path);
    if (!entry || entry.type !== "file") return null;
    const nonEmpty = typeof entry.size === "number" ? entry.size > 0 : (await sandbox.readFile(path)).length > 0;
    return nonEmpty ? path : null;
  } catch (error) {
    rethrowIfControlFlow(error, runtime);
    return null;
  }
}

/**
 * The thread's sandbox, through the path every sandbox user shares (authorization, the provider,
 * a record in the run scope so the Sandbox middleware binds and releases it). The authorization
 * decision is the tool call's own, so the budget can never write where the tool was refused.
 * Undefined when there is no provider or thread, or access is denied or fails.
 */
async function storageSandbox(request: ToolCallRequest, authorizer: SandboxAuthorizer | undefined): Promise<Sandbox | undefined> {
  if (!request.runtime.services.sandbox) return undefined;
  try {
    return await acquireRunSandbox(request.runtime, { authorizer, decisionKey: request.toolCall.id });
  } catch (error) {
    rethrowIfControlFlow(error, request.runtime);
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// Budget

function thresholdFor(toolName: string, config: ToolOutputBudgetConfig): number {
  return Object.hasOwn(config.tool_overrides, toolName) ? config.tool_overrides[toolName]! : config.externalize_min_chars;
}

/** The smallest length that could trigger budgeting for a tool, or -1 when nothing can. */
export function effectiveTrigger(toolName: string, config: ToolOutputBudgetConfig): number {
  const candidates = [thresholdFor(toolName, config), config.fallback_max_chars].filter((limit) => limit > 0);
  return candidates.length > 0 ? Math.min(...candidates) : -1;
}

/**
 * Cheap pre-check. UTF-16 length is never below the code-point length, so a text short in UTF-16
 * is short for certain; only a candidate is measured exactly.
 */
function overBudget(message: ToolMessage, toolName: string, config: ToolOutputBudgetConfig): boolean {
  if (config.exempt_tools.includes(toolName)) return false;
  const trigger = effectiveTrigger(toolName, config);
  if (trigger < 0) return false;
  const text = toolResultText(message.content);
  return text !== null && text.length > trigger;
}

type Phase = "tool_result" | "model_request";

async function budgetMessage(
  message: ToolMessage,
  toolName: string,
  config: ToolOutputBudgetConfig,
  phase: Phase,
  store?: (content: string) => Promise<string | null>,
): Promise<ToolMessage> {
  if (!overBudget(message, toolName, config)) return message;
  const text = toolResultText(message.content)!;
  const length = codePointLength(text);
  const threshold = thresholdFor(toolName, config);
  const fallbackMax = config.fallback_max_chars;
  if (length <= threshold && length <= fallbackMax) return message;

  const trail = (transform: ToolTransformEntry["transform"], visible: string, details: Record<string, string | number> = {}) =>
    replaceToolContent(message, visible, {
      middleware: TOOL_OUTPUT_BUDGET_NAME,
      transform,
      phase,
      original_chars: length,
      visible_chars: codePointLength(visible),
      ...details,
    });

  if (threshold > 0 && length > threshold && store) {
    const path = await store(text);
    if (path !== null) {
      const preview = renderToolOutputPreview(text, {
        toolName,
        virtualPath: path,
        headChars: config.preview_head_chars,
        tailChars: config.preview_tail_chars,
      });
      return trail(ToolTransform.EXTERNALIZED, preview, { path });
    }
  }
  if (fallbackMax > 0 && length > fallbackMax) {
    const cut = buildFallback(text, toolName, fallbackMax, config.fallback_head_chars, config.fallback_tail_chars);
    return trail(ToolTransform.FALLBACK_TRUNCATED, cut);
  }
  return message;
}

export interface ToolOutputBudgetDeps {
  /** The `sandbox:execute` gate the sandbox tools use; a denied call's output is never stored. */
  readonly authorizer?: SandboxAuthorizer;
}

/**
 * Externalises or truncates oversized tool results and fallback-truncates oversized historical
 * ToolMessages in every model request (the checkpoint keeps them). Place it right after
 * InputSanitization, outer of ToolResultSanitization, so it budgets the already-neutralised text.
 */
export function createToolOutputBudgetMiddleware(
  config?: Partial<ToolOutputBudgetConfig>,
  deps: ToolOutputBudgetDeps = {},
): AgentMiddleware {
  const settings = parseMiddlewareConfig(
    ToolOutputBudgetConfigSchema,
    config,
    TOOL_OUTPUT_BUDGET_NAME,
    "Fix this key under tool_output (sizes are whole numbers of characters, 0 or more).",
  );
  const needsBudget = (result: ToolResult, fallbackName: string): boolean => {
    const check = (message: unknown) =>
      ToolMessage.isInstance(message) && overBudget(message, message.name || fallbackName, settings);
    if (ToolMessage.isInstance(result)) return check(result);
    if (!isCommand(result)) return false;
    const update: unknown = (result as Command).update;
    const messages = Array.isArray(update)
      ? update.filter((entry) => Array.isArray(entry) && entry[0] === "messages").flatMap((entry) => [entry[1]].flat())
      : [(update as { messages?: unknown } | undefined)?.messages].flat();
    return messages.some(check);
  };

  return {
    name: TOOL_OUTPUT_BUDGET_NAME,
    async wrapToolCall(request: ToolCallRequest, handler: ToolHandler): Promise<ToolResult> {
      const result = await handler(request);
      const fallbackName = request.toolCall.name || "unknown";
      if (!settings.enabled || !needsBudget(result, fallbackName)) return result;

      // Acquired only once a result really needs storage, and once per call.
      let storage: Promise<Sandbox | undefined> | undefined;
      const store = async (content: string, toolName: string): Promise<string | null> => {
        storage ??= storageSandbox(request, deps.authorizer);
        const sandbox = await storage;
        return sandbox ? externalize(sandbox, content, toolName, settings.storage_subdir, request.runtime) : null;
      };
      return mapToolResultMessages(result, (message) => {
        const toolName = message.name || fallbackName;
        return budgetMessage(message, toolName, settings, "tool_result", (content) => store(content, toolName));
      });
    },
    async wrapModelCall(request: ModelRequest, handler: ModelHandler) {
      if (!settings.enabled) return handler(request);
      // Historical results were budgeted when they came back; only the inline cut is left to do here.
      if (!request.messages.some((m) => ToolMessage.isInstance(m) && overBudget(m, m.name || "unknown", settings))) {
        return handler(request);
      }
      let changed = false;
      const messages: BaseMessage[] = [];
      for (const message of request.messages) {
        if (!ToolMessage.isInstance(message)) {
          messages.push(message);
          continue;
        }
        const patched = await budgetMessage(message, message.name || "unknown", settings, "model_request");
        if (patched !== message) changed = true;
        messages.push(patched);
      }
      return handler(changed ? { ...request, messages } : request);
    },
    releasePolicyParameters() {
      return {
        config: {
          enabled: settings.enabled,
          externalize_min_chars: settings.externalize_min_chars,
          preview_head_chars: settings.preview_head_chars,
          preview_tail_chars: settings.preview_tail_chars,
          fallback_max_chars: settings.fallback_max_chars,
          fallback_head_chars: settings.fallback_head_chars,
          fallback_tail_chars: settings.fallback_tail_chars,
          storage_subdir: settings.storage_subdir,
          exempt_tools: [...settings.exempt_tools].sort(),
          tool_overrides: { ...settings.tool_overrides },
        },
        storage_root: VIRTUAL_DIRS.outputs,
      };
    },
  };
}
