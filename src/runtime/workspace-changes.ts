import { bytesToHex, sha256Bytes } from "../core/hex.ts";
import { VIRTUAL_DIRS, isToolResultArtifact } from "../core/path.ts";
import type { DirEntry, Sandbox, SandboxProvider, SandboxScope } from "../ports/sandbox.ts";
import { SandboxError } from "../ports/sandbox.ts";

/*
 * What a run did to its thread's workspace and outputs folders, in the shape DeerFlow's UI reads
 * (frontend/src/core/workspace-changes/types.ts): a snapshot of both folders before the run and
 * after it, compared. The sandbox port lists paths and sizes but no modification times, so a
 * listing alone cannot see a same-size rewrite: files up to 256 KiB are read and
 * hashed (their text kept for the diff), larger ones, and any past 32 MiB read in one snapshot,
 * compared by size only. At most 2000 files are looked at; past that the result says it was
 * truncated. Excluded folders are never walked into.
 * Excluded: externalised tool results (isToolResultArtifact, the Tool output budget's one rule)
 * and folders that are tooling, not deliverables (.git, node_modules ...), as upstream's scanner.
 */

export const WORKSPACE_CHANGES_EVENT_TYPE = "workspace_changes";
export const WORKSPACE_CHANGES_VERSION = 1;

export const WORKSPACE_CHANGE_LIMITS = Object.freeze({
  max_files: 200,
  max_scanned_files: 2000,
  max_file_bytes_for_diff: 256 * 1024,
  max_total_diff_bytes: 1024 * 1024,
  /** What one snapshot reads at most; files past it are compared by size. */
  max_hashed_bytes: 32 * 1024 * 1024,
});

const ROOTS = [
  { name: "workspace", prefix: VIRTUAL_DIRS.workspace },
  { name: "outputs", prefix: VIRTUAL_DIRS.outputs },
] as const;

const EXCLUDED_DIR_NAMES = new Set([".git", ".hg", ".svn", ".cache", ".next", ".venv", "__pycache__", "build", "dist", "node_modules"]);

const BINARY_EXTENSIONS = new Set(
  ".7z .avif .bmp .class .db .dll .dmg .doc .docx .exe .gif .gz .ico .jar .jpeg .jpg .mov .mp3 .mp4 .o .pdf .png .pyc .so .tar .webp .xls .xlsx .zip".split(" "),
);

/** Names whose content a review must not show (keys, tokens, env files). */
const SENSITIVE_PATTERNS: readonly RegExp[] = [
  /^\.env$/,
  /^\.env\..*/,
  /api_?key/,
  /\.key$/,
  /\.pem$/,
  /credential/,
  /password/,
  /private_key/,
  /secret/,
  /token/,
];

const CONTEXT_LINES = 3;
/** Beyond this many line pairs the diff is one replaced block rather than a line match. */
const MAX_DIFF_CELLS = 4_000_000;

export type WorkspaceChangeStatus = "created" | "modified" | "deleted" | "symlink_created";
export type DiffUnavailableReason = "binary" | "large" | "sensitive" | "truncated" | "symlink";

interface FileSnapshot {
  readonly root: string;
  readonly size: number;
  /** null for files too large to read: compared by size. */
  readonly sha256: string | null;
  readonly binary: boolean;
  readonly sensitive: boolean;
  /** The text, for a small, non-binary, non-sensitive file. */
  readonly text: string | null;
}

export interface WorkspaceSnapshot {
  readonly files: ReadonlyMap<string, FileSnapshot>;
  readonly truncated: boolean;
}

export interface WorkspaceFileChange {
  readonly path: string;
  readonly root: string;
  readonly status: WorkspaceChangeStatus;
  readonly binary: boolean;
  readonly sensitive: boolean;
  readonly size_before: number | null;
  readonly size_after: number | null;
  readonly sha256_before: string | null;
  readonly sha256_after: string | null;
  readonly diff: string;
  readonly diff_truncated: boolean;
  readonly diff_unavailable_reason: DiffUnavailableReason | null;
  readonly additions: number;
  readonly deletions: number;
  readonly symlink: boolean;
  readonly symlink_target_before: string | null;
  readonly symlink_target_after: string | null;
}

export interface WorkspaceChangeSummary {
  readonly created: number;
  readonly modified: number;
  readonly deleted: number;
  readonly symlink_created: number;
  readonly additions: number;
  readonly deletions: number;
  readonly truncated: boolean;
}

export interface WorkspaceChanges {
  readonly version: number;
  readonly summary: WorkspaceChangeSummary;
  readonly files: readonly WorkspaceFileChange[];
  readonly limits: Readonly<Record<string, number>>;
}

export const EMPTY_WORKSPACE_SUMMARY: WorkspaceChangeSummary = Object.freeze({
  created: 0,
  modified: 0,
  deleted: 0,
  symlink_created: 0,
  additions: 0,
  deletions: 0,
  truncated: false,
});

export function isSensitiveWorkspacePath(path: string): boolean {
  return path
    .toLowerCase()
    .split("/")
    .some((segment) => segment !== "" && SENSITIVE_PATTERNS.some((pattern) => pattern.test(segment)));
}

function isExcluded(path: string, toolResultsDirname: string | undefined): boolean {
  if (isToolResultArtifact(path, toolResultsDirname)) return true;
  return path.split("/").some((segment) => EXCLUDED_DIR_NAMES.has(segment));
}

function extensionOf(path: string): string {
  const name = path.slice(path.lastIndexOf("/") + 1);
  const dot = name.lastIndexOf(".");
  return dot > 0 ? name.slice(dot).toLowerCase() : "";
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

function textOf(bytes: Uint8Array): string | null {
  if (bytes.subarray(0, 4096).includes(0)) return null;
  try {
    return utf8.decode(bytes);
  } catch {
    return null;
  }
}

/** How deep a walk goes: a link to a parent folder would otherwise be walked forever. */
const MAX_WALK_DEPTH = 32;

/** A folder's files, depth first, never entering an excluded folder; false when it stopped early (past `room` files, or too deep). */
async function walkFiles(sandbox: Sandbox, dir: string, room: number, toolResultsDirname: string | undefined, out: DirEntry[], depth = 0): Promise<boolean> {
  if (depth > MAX_WALK_DEPTH) return false;
  for (const entry of await sandbox.list(dir, { depth: 1 })) {
    if (isExcluded(entry.path, toolResultsDirname)) continue;
    if (entry.type === "directory") {
      if (!(await walkFiles(sandbox, entry.path, room, toolResultsDirname, out, depth + 1))) return false;
    } else {
      if (out.length >= room) return false;
      out.push(entry);
    }
  }
  return true;
}

/** Both folders of a sandbox, listed, with small files read and hashed (within a byte budget). */
export async function captureWorkspace(sandbox: Sandbox, options: { toolResultsDirname?: string } = {}): Promise<WorkspaceSnapshot> {
  const files = new Map<string, FileSnapshot>();
  let truncated = false;
  let hashedBytes = 0;
  for (const root of ROOTS) {
    const entries: DirEntry[] = [];
    try {
      const complete = await walkFiles(sandbox, root.prefix, WORKSPACE_CHANGE_LIMITS.max_scanned_files - files.size, options.toolResultsDirname, entries);
      if (!complete) truncated = true;
    } catch (error) {
      if (error instanceof SandboxError && error.code === "not_found") continue;
      throw error;
    }
    for (const entry of entries) {
      const size = entry.size ?? 0;
      const sensitive = isSensitiveWorkspacePath(entry.path);
      let binary = BINARY_EXTENSIONS.has(extensionOf(entry.path));
      let sha256: string | null = null;
      let text: string | null = null;
      if (size <= WORKSPACE_CHANGE_LIMITS.max_file_bytes_for_diff && hashedBytes + size <= WORKSPACE_CHANGE_LIMITS.max_hashed_bytes) {
        const bytes = await sandbox.readFileBytes(entry.path).catch(() => undefined);
        if (bytes === undefined) continue; // Gone between the listing and the read.
        hashedBytes += bytes.length;
        sha256 = bytesToHex(await sha256Bytes(bytes));
        const decoded = binary ? null : textOf(bytes);
        if (decoded === null) binary = true;
        else if (!sensitive) text = decoded;
      }
      files.set(entry.path, { root: root.name, size, sha256, binary, sensitive, text });
    }
    if (truncated) break;
  }
  return { files, truncated };
}

function linesOf(text: string): string[] {
  if (text === "") return [];
  const lines = text.split("\n");
  if (lines.at(-1) === "") lines.pop();
  return lines;
}

type Op = { readonly kind: " " | "-" | "+"; readonly line: string };

/** A line-level edit script: common prefix and suffix kept, the middle matched by LCS when small enough. */
function editScript(a: readonly string[], b: readonly string[]): Op[] {
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const ops: Op[] = a.slice(0, start).map((line) => ({ kind: " ", line }));
  const midA = a.slice(start, endA);
  const midB = b.slice(start, endB);
  if (midA.length * midB.length > MAX_DIFF_CELLS) {
    for (const line of midA) ops.push({ kind: "-", line });
    for (const line of midB) ops.push({ kind: "+", line });
  } else {
    const n = midA.length;
    const m = midB.length;
    const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        lcs[i]![j] = midA[i] === midB[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
      }
    }
    let i = 0;
    let j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && midA[i] === midB[j]) {
        ops.push({ kind: " ", line: midA[i]! });
        i++;
        j++;
      } else if (i < n && (j === m || lcs[i + 1]![j]! >= lcs[i]![j + 1]!)) {
        // Ties go to the removal: a replaced line reads `-old` then `+new`.
        ops.push({ kind: "-", line: midA[i++]! });
      } else {
        ops.push({ kind: "+", line: midB[j++]! });
      }
    }
  }
  for (const line of a.slice(endA)) ops.push({ kind: " ", line });
  return ops;
}

/** A unified diff (`--- a<path>` / `+++ b<path>`, 3 lines of context) and its line counts. */
export function unifiedDiff(path: string, before: string, after: string): { diff: string; additions: number; deletions: number } {
  const ops = editScript(linesOf(before), linesOf(after));
  const additions = ops.filter((op) => op.kind === "+").length;
  const deletions = ops.filter((op) => op.kind === "-").length;
  if (additions === 0 && deletions === 0) return { diff: "", additions, deletions };
  const out = [`--- a${path}`, `+++ b${path}`];
  let index = 0;
  while (index < ops.length) {
    while (index < ops.length && ops[index]!.kind === " ") index++;
    if (index >= ops.length) break;
    const hunkStart = Math.max(0, index - CONTEXT_LINES);
    let hunkEnd = index;
    // Extend while the next change is within two contexts of the last one.
    for (let k = index; k < ops.length; k++) {
      if (ops[k]!.kind !== " ") hunkEnd = k + 1;
      else if (k - hunkEnd >= CONTEXT_LINES * 2) break;
    }
    hunkEnd = Math.min(ops.length, hunkEnd + CONTEXT_LINES);
    let lineA = 1;
    let lineB = 1;
    for (const op of ops.slice(0, hunkStart)) {
      if (op.kind !== "+") lineA++;
      if (op.kind !== "-") lineB++;
    }
    const hunk = ops.slice(hunkStart, hunkEnd);
    const countA = hunk.filter((op) => op.kind !== "+").length;
    const countB = hunk.filter((op) => op.kind !== "-").length;
    const range = (line: number, count: number) => `${count === 0 ? line - 1 : line}${count === 1 ? "" : `,${count}`}`;
    out.push(`@@ -${range(lineA, countA)} +${range(lineB, countB)} @@`);
    for (const op of hunk) out.push(`${op.kind}${op.line}`);
    index = hunkEnd;
  }
  return { diff: out.join("\n"), additions, deletions };
}

function changed(before: FileSnapshot, after: FileSnapshot): boolean {
  if (before.size !== after.size) return true;
  return before.sha256 !== null && after.sha256 !== null && before.sha256 !== after.sha256;
}

/** What changed from `before` to `after`, newest state's paths in order, capped as the limits say. */
export function compareWorkspaces(before: WorkspaceSnapshot, after: WorkspaceSnapshot): WorkspaceChanges {
  const paths = [...new Set([...before.files.keys(), ...after.files.keys()])].sort();
  const files: WorkspaceFileChange[] = [];
  const counts = { created: 0, modified: 0, deleted: 0, additions: 0, deletions: 0 };
  let truncated = before.truncated || after.truncated;
  let diffBytes = 0;
  for (const path of paths) {
    const was = before.files.get(path);
    const now = after.files.get(path);
    // Symlinks are listed as what they point to (the port hides them), so symlink_created never occurs here.
    const status: "created" | "modified" | "deleted" | undefined = !was ? "created" : !now ? "deleted" : changed(was, now) ? "modified" : undefined;
    if (status === undefined) continue;
    if (files.length >= WORKSPACE_CHANGE_LIMITS.max_files) {
      truncated = true;
      break;
    }
    const binary = (was?.binary ?? false) || (now?.binary ?? false);
    const sensitive = (was?.sensitive ?? false) || (now?.sensitive ?? false);
    let reason: DiffUnavailableReason | null = null;
    let diff = "";
    let additions = 0;
    let deletions = 0;
    const beforeText = was ? was.text : "";
    const afterText = now ? now.text : "";
    if (sensitive) reason = "sensitive";
    else if (binary) reason = "binary";
    else if (beforeText === null || afterText === null) reason = "large";
    else {
      const result = unifiedDiff(path, beforeText, afterText);
      additions = result.additions;
      deletions = result.deletions;
      if (diffBytes + result.diff.length > WORKSPACE_CHANGE_LIMITS.max_total_diff_bytes) reason = "truncated";
      else {
        diff = result.diff;
        diffBytes += diff.length;
      }
    }
    counts[status] += 1;
    counts.additions += additions;
    counts.deletions += deletions;
    files.push({
      path,
      root: (now ?? was)!.root,
      status,
      binary,
      sensitive,
      size_before: was?.size ?? null,
      size_after: now?.size ?? null,
      sha256_before: was?.sha256 ?? null,
      sha256_after: now?.sha256 ?? null,
      diff,
      diff_truncated: reason === "truncated",
      diff_unavailable_reason: reason,
      additions,
      deletions,
      symlink: false,
      symlink_target_before: null,
      symlink_target_after: null,
    });
  }
  return {
    version: WORKSPACE_CHANGES_VERSION,
    summary: { ...counts, symlink_created: 0, truncated },
    files,
    limits: { ...WORKSPACE_CHANGE_LIMITS },
  };
}

/**
 * What a run delivered: the files it created or changed under outputs (its candidate deliverables),
 * the thread's presented files (present_files), and the ones that are both. Satisfied when the run
 * produced nothing under outputs or presented at least one of what it produced. A record, never a
 * verdict on the run: an unpresented output is shown, the run keeps its status.
 */
export interface RunDelivery {
  readonly produced_paths: readonly string[];
  readonly presented_paths: readonly string[];
  readonly matched_paths: readonly string[];
  readonly satisfied: boolean;
}

/**
 * The delivery check over a run's changes. Externalised tool output is process feedback, so it is
 * never a produced artifact here, even in changes that came from elsewhere than captureWorkspace
 * (which already leaves that folder out), nor a presented one.
 */
export function verifyRunDelivery(changes: Pick<WorkspaceChanges, "files">, presented: readonly string[], options: { toolResultsDirname?: string } = {}): RunDelivery {
  const deliverable = (path: string) => path.startsWith(`${VIRTUAL_DIRS.outputs}/`) && !isToolResultArtifact(path, options.toolResultsDirname);
  const produced = changes.files.filter((file) => file.status === "created" || file.status === "modified").map((file) => file.path).filter(deliverable);
  const presentedPaths = [...new Set(presented)].filter(deliverable);
  const presentedSet = new Set(presentedPaths);
  const matched = produced.filter((path) => presentedSet.has(path));
  return { produced_paths: produced, presented_paths: presentedPaths, matched_paths: matched, satisfied: produced.length === 0 || matched.length > 0 };
}

export interface WorkspaceChangesProbeOptions {
  /** ToolOutputBudget's storage_subdir, when configured: left out like the default folder. */
  readonly toolResultsDirname?: string;
  /**
   * The thread's presented files (its `artifacts`) after the run; with it the record carries a
   * `delivery` check. `values`: the thread's values after the run when the run already has them.
   */
  readonly presented?: (scope: SandboxScope, values: Readonly<Record<string, unknown>> | undefined) => Promise<readonly string[]>;
}

/**
 * A run probe over the thread's sandbox: the snapshot before the run, and at its end the changes,
 * journaled as a `workspace_changes` event (with the run's delivery check when `presented` is
 * given). The final snapshot acquires the sandbox again (the run's Sandbox middleware released the
 * one it used) and releases it after, leaving the sandbox as a run leaves it: saved and released.
 */
export function workspaceChangesProbe(
  provider: SandboxProvider,
  options: WorkspaceChangesProbeOptions = {},
): (scope: SandboxScope) => Promise<(ended?: { readonly values?: Readonly<Record<string, unknown>> }) => Promise<Record<string, unknown>>> {
  const scan = options.toolResultsDirname === undefined ? {} : { toolResultsDirname: options.toolResultsDirname };
  return async (scope) => {
    const before = await captureWorkspace(await provider.acquire(scope), scan);
    return async (ended = {}) => {
      const sandbox = await provider.acquire(scope);
      let changes: WorkspaceChanges;
      try {
        changes = compareWorkspaces(before, await captureWorkspace(sandbox, scan));
      } finally {
        if (provider.get(sandbox.id) === sandbox) await provider.release(sandbox.id);
      }
      const delivery = options.presented ? verifyRunDelivery(changes, await options.presented(scope, ended.values), scan) : undefined;
      return { type: WORKSPACE_CHANGES_EVENT_TYPE, ...changes, ...(delivery ? { delivery } : {}) };
    };
  };
}
