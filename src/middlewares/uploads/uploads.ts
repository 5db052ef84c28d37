import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { isGraphBubbleUp } from "@langchain/langgraph/web";
import * as v from "valibot";
import type { Assert, SameType } from "../../core/types.ts";
import { contentText } from "../../core/content.ts";
import type { AgentMiddleware, AgentRuntime, AgentState, HookResult } from "../../engine/types.ts";
import { canonicalHashSync } from "../../extension-api/sha256-sync.ts";
import { SandboxError, VIRTUAL_DIRS, type Sandbox } from "../../ports/sandbox.ts";
import type { UploadedFile } from "../../state/thread-state.ts";
import { acquireRunSandbox, type SandboxAuthorizer } from "../../sandbox/acquire.ts";
import { parseMiddlewareConfig } from "../../engine/middleware-config.ts";
import { ORIGINAL_USER_CONTENT_KEY, USER_CONTENT_TEXT, neutralizeUntrustedTags } from "../input-sanitization.ts";
import { MAX_OUTLINE_ENTRIES, documentOutline, type DocumentOutline } from "./outline.ts";
import { fileSuffix, isBareFileName, isUploadStagingFile } from "../../sandbox/upload-names.ts";

export { fileSuffix, isBareFileName, isUploadStagingFile } from "../../sandbox/upload-names.ts";

/*
 * Tells the model which files the user attached to this message. The client uploads first and
 * sends the file list in the message's `additional_kwargs.files`; this lists the ones that really
 * landed in the thread's uploads folder as a <current_uploads> block in front of the user's text,
 * with each file's path and, for converted documents, an outline to navigate by. Only this
 * message's files are listed: earlier uploads are found on demand, not repeated every turn.
 * Filenames and document text are the user's, so they are neutralised before they enter the
 * trusted block. Lead agent only.
 */

export const UPLOADS_NAME = "Uploads";

export const UPLOADS_BLOCK_TAG = "current_uploads";

export const UploadsConfigSchema = v.strictObject({
  /** Files listed in the block; the rest are summarised by count and extension. */
  max_files_per_context_section: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1)), 10),
});
export interface UploadsConfig {
  max_files_per_context_section: number;
}
type _UploadsConfigMatches = Assert<SameType<UploadsConfig, v.InferOutput<typeof UploadsConfigSchema>>>;

const UPLOADS_DIR = VIRTUAL_DIRS.uploads;

const USAGE_LINES: readonly string[] = Object.freeze([
  "To work with these files:",
  "- Read from the file first — use the outline line numbers and `read_file` to locate relevant sections.",
  "- Use `grep` to search for keywords when you are not sure which section to look at",
  `  (e.g. \`grep(pattern='revenue', path='${UPLOADS_DIR}/')\`).`,
  "- Use `glob` to find files by name pattern",
  `  (e.g. \`glob(pattern='**/*.md', path='${UPLOADS_DIR}/')\`).`,
  "- Only fall back to web search if the file content is clearly insufficient to answer the question.",
]);

/** One listed file; the outline only while the block is built, never in state. */
interface ContextFile extends UploadedFile {
  filename: string;
  size: number;
  path: string;
  extension: string;
  outline?: DocumentOutline;
}


/** int(size or 0): whole numbers and integer strings; anything else counts as 0. */
function sizeOf(value: unknown): number {
  if (typeof value === "number" && Number.isFinite(value)) return Math.trunc(value);
  if (typeof value === "boolean") return value ? 1 : 0;
  if (typeof value === "string" && /^\s*[+-]?\d+\s*$/.test(value)) return Number.parseInt(value, 10);
  return 0;
}

/**
 * `n.n KB` below 1024 KB, else `n.n MB`, rounded half-to-even on the exact value as Python's
 * format does (0.25 KB reads "0.2 KB"; JavaScript's toFixed would say "0.3").
 */
export function formatFileSize(bytes: number): string {
  const negative = bytes < 0;
  const magnitude = Math.abs(bytes);
  const [unit, divisor] = magnitude / 1024 < 1024 || negative ? ["KB", 1024] : ["MB", 1024 * 1024];
  const scaled = magnitude * 10;
  let tenths = Math.floor(scaled / divisor);
  const remainder = scaled - tenths * divisor;
  if (remainder * 2 > divisor || (remainder * 2 === divisor && tenths % 2 === 1)) tenths += 1;
  return `${negative ? "-" : ""}${Math.floor(tenths / 10)}.${tenths % 10} ${unit}`;
}

function extensionLabel(file: ContextFile): string {
  return neutralizeUntrustedTags((file.extension || fileSuffix(file.filename)).toLowerCase()) || "(no extension)";
}

function omittedFileTypes(files: readonly ContextFile[]): string {
  const counts = new Map<string, number>();
  for (const file of files) counts.set(extensionLabel(file), (counts.get(extensionLabel(file)) ?? 0) + 1);
  const sorted = [...counts].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return neutralizeUntrustedTags(sorted.map(([extension, count]) => `${count} ${extension}`).join(", "));
}

function formatFileEntry(file: ContextFile, lines: string[]): void {
  lines.push(`- ${neutralizeUntrustedTags(file.filename)} (${formatFileSize(file.size)})`);
  lines.push(`  Path: ${neutralizeUntrustedTags(file.path)}`);
  const outline = file.outline?.outline ?? [];
  if (outline.length > 0) {
    const visible = outline.filter((entry): entry is { title: string; line: number } => !("truncated" in entry));
    lines.push("  Document outline (use `read_file` with line ranges to read sections):");
    for (const entry of visible) lines.push(`    L${entry.line}: ${neutralizeUntrustedTags(entry.title)}`);
    if ("truncated" in outline.at(-1)!) {
      lines.push(`    ... (showing first ${visible.length} headings; use \`read_file\` to explore further)`);
    }
  } else {
    const preview = file.outline?.preview ?? [];
    if (preview.length > 0) {
      lines.push("  No structural headings detected. Document begins with:");
      for (const text of preview) lines.push(`    > ${neutralizeUntrustedTags(text)}`);
    }
    lines.push(`  Use \`grep\` to search for keywords (e.g. \`grep(pattern='keyword', path='${UPLOADS_DIR}/')\`).`);
  }
  lines.push("");
}

/** The <current_uploads> block: listed files, a summary of the ones over the cap, how to read them. */
export function formatUploadsBlock(files: readonly ContextFile[], omitted: readonly ContextFile[] = []): string {
  const lines = [`<${UPLOADS_BLOCK_TAG}>`, "The following files were uploaded in this message:", ""];
  if (files.length > 0) {
    for (const file of files) formatFileEntry(file, lines);
    if (omitted.length > 0) {
      lines.push(`... (${omitted.length} more file(s) from this message omitted from this context.)`);
      lines.push(`  Omitted file types: ${omittedFileTypes(omitted)}`);
      lines.push(`  Use \`glob(pattern='**/*', path='${UPLOADS_DIR}/')\` to list all uploads.`);
      lines.push(`  Use \`grep(pattern='keyword', path='${UPLOADS_DIR}/')\` to search across uploads.`);
      lines.push("");
    }
  } else {
    lines.push("(empty)", "");
  }
  lines.push(...USAGE_LINES, `</${UPLOADS_BLOCK_TAG}>`);
  return lines.join("\n");
}

/** Names of the regular files directly in the uploads folder; empty when it does not exist yet. */
async function uploadedNames(sandbox: Sandbox): Promise<Set<string>> {
  try {
    const entries = await sandbox.list(UPLOADS_DIR, { depth: 1 });
    return new Set(entries.filter((entry) => entry.type === "file").map((entry) => entry.name));
  } catch (error) {
    if (error instanceof SandboxError && error.code === "not_found") return new Set();
    throw error;
  }
}

/** The message's declared files that are bare names, not staging files, and present in `present`. */
export function filesFromKwargs(message: BaseMessage, present: ReadonlySet<string>): ContextFile[] {
  const declared = message.additional_kwargs?.["files"];
  if (!Array.isArray(declared)) return [];
  const files: ContextFile[] = [];
  for (const entry of declared) {
    if (typeof entry !== "object" || entry === null || Array.isArray(entry)) continue;
    const raw = (entry as { filename?: unknown }).filename;
    const filename = typeof raw === "string" ? raw : "";
    if (!isBareFileName(filename) || isUploadStagingFile(filename) || !present.has(filename)) continue;
    files.push({
      filename,
      size: sizeOf((entry as { size?: unknown }).size),
      // Always our own virtual path: the client's `path` is not trusted to point into the uploads folder.
      path: `${UPLOADS_DIR}/${filename}`,
      extension: fileSuffix(filename),
    });
  }
  return files;
}

/** The converted sibling Path(name).with_suffix(".md"); a Markdown upload is its own. */
function markdownSibling(filename: string): string {
  const suffix = fileSuffix(filename);
  return `${suffix ? filename.slice(0, -suffix.length) : filename}.md`;
}

function rethrowIfControlFlow(error: unknown, runtime: AgentRuntime): void {
  if (isGraphBubbleUp(error) || runtime.signal?.aborted) throw error;
}

async function outlineOf(sandbox: Sandbox, filename: string, present: ReadonlySet<string>, runtime: AgentRuntime): Promise<DocumentOutline | undefined> {
  const sibling = markdownSibling(filename);
  if (!present.has(sibling)) return undefined;
  try {
    return documentOutline(await sandbox.readFile(`${UPLOADS_DIR}/${sibling}`));
  } catch (error) {
    rethrowIfControlFlow(error, runtime);
    return undefined;
  }
}

/**
 * The thread's sandbox, acquired the way the file tools acquire it (same user bucket and thread,
 * recorded in the run scope so the Sandbox middleware binds and releases it): a listed file must
 * be one read_file can open. Undefined when there is none to be had.
 */
async function threadSandbox(runtime: AgentRuntime, authorizer: SandboxAuthorizer | undefined): Promise<Sandbox | undefined> {
  if (!runtime.services.sandbox) return undefined;
  try {
    return await acquireRunSandbox(runtime, { authorizer });
  } catch (error) {
    // No thread, access denied, or a sandbox that will not start: nothing can be checked, and a
    // file the model cannot read is worse than one it is not told about.
    rethrowIfControlFlow(error, runtime);
    return undefined;
  }
}

function validOriginal(value: unknown): value is string {
  return typeof value === "string" && value !== "";
}

export interface UploadsDeps {
  /** The `sandbox:execute` gate the file tools use; when it denies, no upload can be read, so none is listed. */
  readonly authorizer?: SandboxAuthorizer;
}

/**
 * Lists this message's uploads to the model and records them in `uploaded_files` (cleared when
 * there are none, so the previous turn's list never looks current). A file counts only once it is
 * in the thread's uploads folder: no sandbox means nothing can be checked or read, so nothing is
 * listed.
 */
export function createUploadsMiddleware(config?: Partial<UploadsConfig>, deps: UploadsDeps = {}): AgentMiddleware {
  const { max_files_per_context_section: maxFiles } = parseMiddlewareConfig(
    UploadsConfigSchema,
    config,
    UPLOADS_NAME,
    "Fix this key under uploads (max_files_per_context_section is a whole number, 1 or more).",
  );
  const cleared: HookResult = { uploaded_files: [] };

  return {
    name: UPLOADS_NAME,
    async beforeAgent(state: AgentState, runtime: AgentRuntime): Promise<HookResult> {
      const last = state.messages.at(-1);
      if (!last || !HumanMessage.isInstance(last)) return cleared;
      const declared = last.additional_kwargs?.["files"];
      if (!Array.isArray(declared) || declared.length === 0) return cleared;

      const sandbox = await threadSandbox(runtime, deps.authorizer);
      if (!sandbox) return cleared;
      let present: Set<string>;
      try {
        present = await uploadedNames(sandbox);
      } catch (error) {
        rethrowIfControlFlow(error, runtime);
        return cleared;
      }
      const files = filesFromKwargs(last, present);
      if (files.length === 0) return cleared;

      const listed: ContextFile[] = [];
      for (const file of files.slice(0, maxFiles)) {
        const outline = await outlineOf(sandbox, file.filename, present, runtime);
        listed.push(outline ? { ...file, outline } : { ...file });
      }
      const block = formatUploadsBlock(listed, files.slice(maxFiles));
      const uploaded_files: UploadedFile[] = files.map((file) => ({ ...file }));

      const content = last.content as unknown;
      const prefix = `${block}\n\n`;
      // A re-run of the same turn (a retried run) must not stack a second identical block.
      if (contentText(content, USER_CONTENT_TEXT).startsWith(prefix)) return { uploaded_files };
      let updated: unknown;
      if (typeof content === "string") updated = `${prefix}${content}`;
      else if (Array.isArray(content)) updated = [{ type: "text", text: prefix }, ...content];
      else return { uploaded_files };
      // Replacing in place needs the id; the engine's reducer gives every message one.
      if (last.id === undefined) return { uploaded_files };

      const kwargs: Record<string, unknown> = { ...last.additional_kwargs };
      // First writer wins for a real string (a trusted IM caller may have captured it before
      // adding transport context); anything else is replaced by the text as the user sent it.
      if (!validOriginal(kwargs[ORIGINAL_USER_CONTENT_KEY])) {
        kwargs[ORIGINAL_USER_CONTENT_KEY] = contentText(content, USER_CONTENT_TEXT);
      }
      const hasMetadata = last.response_metadata && Object.keys(last.response_metadata).length > 0;
      const message = new HumanMessage({
        content: updated as HumanMessage["content"],
        id: last.id,
        ...(last.name !== undefined ? { name: last.name } : {}),
        additional_kwargs: kwargs,
        ...(hasMetadata ? { response_metadata: last.response_metadata } : {}),
      });
      return { uploaded_files, messages: [message] };
    },
    releasePolicyParameters() {
      return {
        max_files_per_context_section: maxFiles,
        block_tag: UPLOADS_BLOCK_TAG,
        uploads_dir: UPLOADS_DIR,
        outline_max_entries: MAX_OUTLINE_ENTRIES,
        usage_hints_hash: canonicalHashSync(USAGE_LINES.join("\n")),
        original_user_content: "first_valid_string_wins",
        authorization_gate: deps.authorizer !== undefined,
      };
    },
  };
}
