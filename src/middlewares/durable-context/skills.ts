import type { AIMessage, BaseMessage, ToolMessage } from "@langchain/core/messages";
import { contentText } from "../../core/content.ts";
import { normalizePosixPath } from "../../core/path.ts";
import { readFrontMatterMapping } from "../../skills/front-matter.ts";
import { MAX_SKILL_DESCRIPTION_CHARS } from "../../state/reducers.ts";
import type { SkillContextEntry } from "../../state/types.ts";
import { escapeHtml } from "./ledger.ts";

/*
 * Which skills the model has loaded: a read of `<skills root>/.../SKILL.md` becomes a compact
 * reference (name, path, description) in ThreadState.skill_context, never the body, so the model
 * is told to re-read a skill it still relies on after summarisation dropped the read.
 */

export const SKILL_CONTEXT_ENTRY_KEY = "skill_context_entry";
export const DEFAULT_SKILL_FILE_READ_TOOL_NAMES: readonly string[] = Object.freeze(["read_file", "read", "view", "cat"]);

const SKILL_FILE_NAME = "SKILL.md";
const PATH_ARG_KEYS = ["path", "file_path", "filepath"] as const;

/** A skill read as captured from the conversation (the reducer adds loaded_at ordering rules). */
export interface SkillCapture {
  name: string;
  path: string;
  description: string;
}

export function normalizeSkillsRoot(root: string | undefined): string {
  return normalizePosixPath(root || "/mnt/skills");
}

/** `path` normalised when it lies inside `root`, else undefined (`..` cannot climb out). */
function underRoot(path: string, root: string): string | undefined {
  if (!path.startsWith("/") || path.includes("\0")) return undefined;
  const normalized = normalizePosixPath(path);
  if (root === "/") return normalized;
  return normalized === root || normalized.startsWith(`${root}/`) ? normalized : undefined;
}

function basename(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1);
}

function isSkillFile(path: string): boolean {
  return basename(path) === SKILL_FILE_NAME;
}

function collapse(text: string): string {
  const flat = text.split(/\s+/).filter(Boolean).join(" ");
  return Array.from(flat).slice(0, MAX_SKILL_DESCRIPTION_CHARS).join("");
}

function isErrorText(text: string): boolean {
  return text.trimStart().startsWith("Error:");
}

/** The reference a successful read of `path` yields, parsed in memory from the text the tool returned. */
export function skillEntryFromRead(path: string, content: string, skillsRoot: string): { path: string; description: string } | undefined {
  const normalized = underRoot(path, normalizeSkillsRoot(skillsRoot));
  if (normalized === undefined || !isSkillFile(normalized) || isErrorText(content)) return undefined;
  const description = readFrontMatterMapping(content)?.["description"];
  return { path: normalized, description: typeof description === "string" ? collapse(description) : "" };
}

/** The `skill_context_entry` a tool wrapper stamped on a read result, when well-formed. */
export function readSkillEntryMetadata(kwargs: Readonly<Record<string, unknown>> | undefined): { path: string; description: string } | undefined {
  const raw = kwargs?.[SKILL_CONTEXT_ENTRY_KEY];
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return undefined;
  const { path, description } = raw as Record<string, unknown>;
  if (typeof path !== "string") return undefined;
  return { path, description: typeof description === "string" ? collapse(description) : "" };
}

function isAi(message: BaseMessage): message is AIMessage {
  return message.type === "ai";
}

function isTool(message: BaseMessage): message is ToolMessage {
  return message.type === "tool";
}

function callPath(args: unknown): string | undefined {
  if (typeof args !== "object" || args === null) return undefined;
  for (const key of PATH_ARG_KEYS) {
    const value = (args as Record<string, unknown>)[key];
    if (typeof value === "string" && value !== "") return value;
  }
  return undefined;
}

/**
 * Skill files read successfully, in message order, one entry per path (the last read wins its
 * position). The path comes from the model's own read call; metadata stamped on the result is
 * used only when it names that same path, and is otherwise ignored rather than re-parsed.
 */
export function extractSkills(messages: readonly BaseMessage[], options: { skillsRoot: string; readToolNames: readonly string[] }): SkillCapture[] {
  const root = normalizeSkillsRoot(options.skillsRoot);
  const readNames = new Set(options.readToolNames);
  if (readNames.size === 0) return [];
  const pathsByCallId = new Map<string, string>();
  for (const message of messages) {
    if (!isAi(message)) continue;
    for (const call of message.tool_calls ?? []) {
      if (!readNames.has(call.name) || !call.id) continue;
      const raw = callPath(call.args);
      const path = raw === undefined ? undefined : underRoot(raw, root);
      if (path !== undefined && isSkillFile(path)) pathsByCallId.set(call.id, path);
    }
  }
  if (pathsByCallId.size === 0) return [];

  const byPath = new Map<string, SkillCapture>();
  for (const message of messages) {
    if (!isTool(message) || message.status === "error") continue;
    const expected = pathsByCallId.get(message.tool_call_id);
    if (expected === undefined) continue;
    const stamped = readSkillEntryMetadata(message.additional_kwargs);
    let description: string;
    if (stamped !== undefined) {
      if (stamped.path !== expected) continue;
      description = stamped.description;
    } else {
      const fromContent = skillEntryFromRead(expected, contentText(message.content), root);
      if (fromContent === undefined) continue;
      description = fromContent.description;
    }
    byPath.delete(expected);
    // The name is rebuilt from the validated path, never taken from stamped metadata.
    byPath.set(expected, { name: basename(expected.slice(0, expected.lastIndexOf("/"))), path: expected, description });
  }
  return [...byPath.values()];
}

/** The `## Active skills` section: references to re-read, never bodies. "" when there are none. */
export function renderSkillContext(stored: readonly unknown[]): string {
  const lines: string[] = [];
  for (const raw of stored) {
    if (typeof raw !== "object" || raw === null) continue;
    const { name, path, description } = raw as Partial<Record<keyof SkillContextEntry, unknown>>;
    if (typeof path !== "string" || path === "") continue;
    const shownName = typeof name === "string" && name !== "" ? name : basename(path.slice(0, path.lastIndexOf("/")));
    const text = typeof description === "string" ? collapse(description) : "";
    lines.push(`- ${escapeHtml(shownName)}${text ? `: ${escapeHtml(text)}` : ""} -> ${escapeHtml(path)}`);
  }
  if (lines.length === 0) return "";
  return ["## Active skills (loaded earlier - re-read the file before applying its instructions)", ...lines].join("\n");
}
