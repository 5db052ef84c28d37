import { SandboxError, VIRTUAL_DIRS, VIRTUAL_ROOT } from "../ports/sandbox.ts";

const ROOTS: readonly string[] = Object.values(VIRTUAL_DIRS);
const ALLOWED_ROOTS_TEXT = ROOTS.join(", ");

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

/** The refusal every sandbox kind gives for a path outside the roots; `detail` replaces "is outside the sandbox". */
export function pathOutsideSandbox(path: string, detail?: string): SandboxError {
  const shown = JSON.stringify(path.replaceAll("\0", "\\0"));
  return new SandboxError(
    "path_outside_sandbox",
    `Path ${shown} ${detail ?? "is outside the sandbox"}. ` +
      `Use a path under one of ${ALLOWED_ROOTS_TEXT} (relative paths resolve against ${VIRTUAL_DIRS.workspace}).`,
  );
}

/**
 * PATH_MAX: a resolved sandbox path may have this many bytes of UTF-8. A file system answers for a
 * path in time that grows with its length (the in-memory one faster than linearly), and a model's
 * tool call can name a path of any length.
 */
export const MAX_VIRTUAL_PATH_BYTES = 4096;
const utf8 = new TextEncoder();

function isTooLong(path: string): boolean {
  return path.length > MAX_VIRTUAL_PATH_BYTES || utf8.encode(path).length > MAX_VIRTUAL_PATH_BYTES;
}

/**
 * Resolves a virtual path, absolute or relative to `cwd` (default: the workspace), to a normalized
 * absolute path inside the virtual roots. Throws SandboxError "path_outside_sandbox" for anything
 * that lands outside them, for NUL bytes, and for a path longer than MAX_VIRTUAL_PATH_BYTES.
 */
export function resolveVirtualPath(path: string, cwd: string = VIRTUAL_DIRS.workspace): string {
  if (typeof path !== "string") throw pathOutsideSandbox(String(path), "is not a string");
  if (path.includes("\0")) throw pathOutsideSandbox(path, "contains a NUL byte");
  if (cwd.includes("\0") || !isInsideVirtualRoots(cwd)) throw pathOutsideSandbox(cwd, "is not a valid working directory");
  const joined = path.startsWith("/") ? path : `${cwd}/${path}`;
  const resolved = normalizePosixPath(joined);
  if (isTooLong(resolved)) {
    const shown = path.length > 120 ? `${path.slice(0, 120)}…` : path;
    throw pathOutsideSandbox(shown, `is longer than the ${MAX_VIRTUAL_PATH_BYTES} bytes a sandbox path may have once resolved`);
  }
  if (!isInsideVirtualRoots(resolved)) {
    throw pathOutsideSandbox(path, resolved === path ? undefined : `is outside the sandbox (it resolves to ${JSON.stringify(resolved)})`);
  }
  return resolved;
}

/** `/mnt/user-data/workspace/a` -> `/workspace/a`: the part below VIRTUAL_ROOT, for mapping to a host dir. */
export function pathBelowVirtualRoot(resolved: string): string {
  return resolved.slice(VIRTUAL_ROOT.length);
}
