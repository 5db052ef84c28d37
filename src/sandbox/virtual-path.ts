import { normalizePosixPath, isInsideVirtualRoots, VIRTUAL_DIRS, VIRTUAL_ROOT } from "../core/path.ts";
import { SandboxError } from "../ports/sandbox.ts";

/*
 * The sandbox's path policy: resolving a model's path argument into the virtual roots, and the
 * refusal every sandbox kind gives for one outside them. The plain path rules are in core/path.ts.
 */

const ALLOWED_ROOTS_TEXT = Object.values(VIRTUAL_DIRS).join(", ");

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
