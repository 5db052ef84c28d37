/** The virtual paths every sandbox exposes, per user and thread. */
export const VIRTUAL_ROOT = "/mnt/user-data";
export const VIRTUAL_DIRS = {
  workspace: "/mnt/user-data/workspace",
  uploads: "/mnt/user-data/uploads",
  outputs: "/mnt/user-data/outputs",
} as const;
export type VirtualDirName = keyof typeof VIRTUAL_DIRS;

const ROOTS: readonly string[] = Object.values(VIRTUAL_DIRS);

/**
 * POSIX normalization of a path string, with no file system access: collapses repeated slashes,
 * drops `.` segments and resolves `..` against the segment before it. `..` at the root stays at the
 * root, as POSIX does. A relative path stays relative (leading `..` segments are kept).
 */
export function normalizePosixPath(path: string): string {
  const absolute = path.startsWith("/");
  const out: string[] = [];
  for (const segment of path.split("/")) {
    if (segment === "" || segment === ".") continue;
    if (segment === "..") {
      if (out.length > 0 && out[out.length - 1] !== "..") out.pop();
      else if (!absolute) out.push("..");
      continue;
    }
    out.push(segment);
  }
  const body = out.join("/");
  if (absolute) return `/${body}`;
  return body === "" ? "." : body;
}

/** True when `path`, once normalized, is one of the virtual roots or lies below one. */
export function isInsideVirtualRoots(path: string): boolean {
  if (!path.startsWith("/") || path.includes("\0")) return false;
  const normalized = normalizePosixPath(path);
  return ROOTS.some((root) => normalized === root || normalized.startsWith(`${root}/`));
}

/** The virtual root (`/mnt/user-data/workspace` ...) that holds a normalized in-root path. */
export function virtualRootOf(path: string): string | undefined {
  const normalized = normalizePosixPath(path);
  return ROOTS.find((root) => normalized === root || normalized.startsWith(`${root}/`));
}

/**
 * The folder, under the outputs dir, that ToolOutputBudget writes externalised tool results to
 * by default (its `storage_subdir`). Declared once: the budget writes there, and present_files,
 * the workspace-changes scan and every artifact listing skip it by this name.
 */
export const TOOL_RESULTS_DIRNAME = ".tool-results";

/**
 * Whether a path is an externalised tool result rather than something the run produced: a folder
 * named like the storage folder (the default always, a configured one too) anywhere below a
 * virtual root, or anywhere in a relative path. The root itself is not looked at, so a storage
 * folder named like one of its segments ("outputs") does not swallow every file.
 */
export function isToolResultArtifact(path: string, storageSubdir: string = TOOL_RESULTS_DIRNAME): boolean {
  const root = ROOTS.find((candidate) => path.startsWith(`${candidate}/`));
  const segments = (root === undefined ? path : path.slice(root.length + 1)).split(/[/\\]/);
  return segments.includes(TOOL_RESULTS_DIRNAME) || (storageSubdir !== "" && segments.includes(storageSubdir));
}
