import { pathOutsideSandbox, resolveVirtualPath } from "./virtual-path.ts";
import { SandboxError, VIRTUAL_DIRS } from "../ports/sandbox.ts";
import type { DirEntry, ExecOptions, ExecResult, Sandbox, SandboxScope } from "../ports/sandbox.ts";

export type BackendKind = "file" | "directory" | "symlink" | "other";

/**
 * The few file system calls a sandbox's file API needs, on backend paths (host paths for local,
 * in-memory paths for virtual). Failures throw errors that `errorCode` can classify.
 */
export interface FileBackend {
  /** Backend path of a resolved, in-root virtual path. */
  toBackend(virtualPath: string): string;
  /** Whether a symlink-free backend path lies in the area this sandbox may touch. */
  containsReal(realPath: string): boolean;
  dirname(path: string): string;
  join(dir: string, name: string): string;
  realpath(path: string): Promise<string>;
  lstat(path: string): Promise<{ kind: BackendKind; size: number }>;
  stat(path: string): Promise<{ kind: BackendKind; size: number }>;
  readdir(path: string): Promise<Array<{ name: string; kind: BackendKind }>>;
  readText(path: string): Promise<string>;
  readBytes(path: string): Promise<Uint8Array>;
  writeText(path: string, content: string): Promise<void>;
  /** Creates or replaces the file with these bytes, so that no reader ever sees a partial file. */
  writeBytes(path: string, bytes: Uint8Array): Promise<void>;
  /** Removes a file or a symbolic link (the link itself), never a directory. */
  unlink(path: string): Promise<void>;
  appendText(path: string, content: string): Promise<void>;
  mkdirp(path: string): Promise<void>;
  /** "ENOENT", "ENOTDIR", "ELOOP" ... or undefined for errors of another kind. */
  errorCode(error: unknown): string | undefined;
}

/** DeerFlow's list_dir default: children and grandchildren. */
export const DEFAULT_LIST_DEPTH = 2;

const ROOTS: readonly string[] = Object.values(VIRTUAL_DIRS);

function symlinkEscape(path: string, why: string): SandboxError {
  return pathOutsideSandbox(path, `${why}; symbolic links may only point inside the sandbox`);
}

/** The file half of a Sandbox, shared by the virtual and local kinds. */
export class SandboxFileOps {
  constructor(private readonly backend: FileBackend) {}

  /**
   * Resolves a virtual path and proves that neither it nor an ancestor leaves the sandbox through a
   * symlink. `backend` is the symlink-free location: the real path of the deepest existing ancestor
   * plus the components that do not exist yet, so later calls act on what was checked. `exists`
   * says whether the whole path resolved (nothing needs asking the backend again when it did not).
   */
  async resolve(path: string, cwd?: string): Promise<{ virtual: string; backend: string; exists: boolean }> {
    const virtual = resolveVirtualPath(path, cwd);
    return { virtual, ...(await this.#realInside(this.backend.toBackend(virtual), path)) };
  }

  /**
   * A logarithmic number of backend calls on the shortest prefixes that settle it: probes 1, 2, 4 ...
   * levels below the root until one is missing, then a binary search between the last level found
   * and that one (an ancestor of an existing path exists, so existence is monotonic along the
   * chain). Asking every missing level in turn, from the target up, cost one realpath per level,
   * each itself linear or worse in the path's length: a deep missing path took cubic time.
   */
  async #realInside(target: string, shown: string): Promise<{ backend: string; exists: boolean }> {
    const b = this.backend;
    // chain[0] is the backend's root, each next entry one level deeper, the last one the target.
    const chain = [target];
    for (let parent = b.dirname(target); parent !== chain.at(-1); parent = b.dirname(parent)) chain.push(parent);
    chain.reverse();
    const last = chain.length - 1;
    let existing = -1;
    let missing = chain.length;
    let real: string | undefined;
    for (let reach = 1; existing < last && missing === chain.length; reach *= 2) {
      const probe = Math.min(existing + reach, last);
      const found = await this.#realpathIfExists(chain[probe]!, shown);
      if (found === undefined) missing = probe;
      else [existing, real] = [probe, found];
    }
    while (missing - existing > 1) {
      const middle = (existing + missing) >>> 1;
      const found = await this.#realpathIfExists(chain[middle]!, shown);
      if (found === undefined) missing = middle;
      else [existing, real] = [middle, found];
    }
    if (real === undefined) throw symlinkEscape(shown, "could not be resolved");
    if (!b.containsReal(real)) throw symlinkEscape(shown, "leads outside the sandbox through a symbolic link");
    if (existing < last) {
      // Only the first missing level can be a link: nothing below a missing level exists at all.
      // A dangling symlink would let a write create its target anywhere.
      const kind = await b.lstat(chain[missing]!).then((s) => s.kind, () => undefined);
      if (kind === "symlink") throw symlinkEscape(shown, "is a symbolic link whose target does not exist");
    }
    const rest = target.slice(chain[existing]!.length).replace(/^[\\/]+/, "");
    return { backend: rest === "" ? real : b.join(real, rest), exists: existing === last };
  }

  /** The real path, or undefined when the path (or an ancestor) does not exist. */
  async #realpathIfExists(path: string, shown: string): Promise<string | undefined> {
    try {
      return await this.backend.realpath(path);
    } catch (error) {
      const code = this.backend.errorCode(error);
      if (code === "ELOOP") throw symlinkEscape(shown, "goes through a symbolic link loop");
      if (code !== "ENOENT" && code !== "ENOTDIR") throw error;
      return undefined;
    }
  }

  /** The working directory of a command, which must exist and be a directory. */
  async workingDirectory(path: string): Promise<{ virtual: string; backend: string }> {
    const resolved = await this.resolve(path);
    if (!resolved.exists || !(await this.backend.stat(resolved.backend).then((s) => s.kind === "directory", () => false))) {
      throw new SandboxError(
        "not_found",
        `Working directory ${resolved.virtual} does not exist. Create it first (mkdir -p ${resolved.virtual}).`,
      );
    }
    return resolved;
  }

  /** What a resolved path is; undefined when it does not exist (known from resolve, not asked again). */
  async #kind(resolved: { backend: string; exists: boolean }): Promise<{ kind: BackendKind; size: number } | undefined> {
    if (!resolved.exists) return undefined;
    try {
      return await this.backend.stat(resolved.backend);
    } catch (error) {
      const code = this.backend.errorCode(error);
      if (code === "ENOENT" || code === "ENOTDIR") return undefined;
      throw error;
    }
  }

  /** The backend path of an existing file, after the same checks every read makes. */
  async #readable(path: string): Promise<string> {
    const resolved = await this.resolve(path);
    const { virtual, backend } = resolved;
    const st = await this.#kind(resolved);
    if (!st) throw new SandboxError("not_found", `File ${virtual} does not exist. List the directory to see what is there.`);
    if (st.kind === "directory") {
      throw new SandboxError("is_directory", `${virtual} is a directory, not a file. List it instead of reading it.`);
    }
    return backend;
  }

  /** The backend path a write goes to, its parent folders made: refused when it names a directory. */
  async #writable(path: string): Promise<string> {
    const resolved = await this.resolve(path);
    const { virtual, backend } = resolved;
    const st = await this.#kind(resolved);
    if (st?.kind === "directory") {
      throw new SandboxError("is_directory", `${virtual} is a directory; write to a file path inside it instead.`);
    }
    await this.backend.mkdirp(this.backend.dirname(backend));
    return backend;
  }

  async readFile(path: string): Promise<string> {
    return this.backend.readText(await this.#readable(path));
  }

  async readFileBytes(path: string): Promise<Uint8Array> {
    return this.backend.readBytes(await this.#readable(path));
  }

  async writeFile(path: string, content: string, options?: { append?: boolean }): Promise<void> {
    const backend = await this.#writable(path);
    if (options?.append) await this.backend.appendText(backend, content);
    else await this.backend.writeText(backend, content);
  }

  async writeFileBytes(path: string, bytes: Uint8Array): Promise<void> {
    await this.backend.writeBytes(await this.#writable(path), bytes);
  }

  /**
   * Only the parent is resolved through symlinks: the last component is the entry to delete, so a
   * link is unlinked where it lies instead of its target being deleted somewhere else.
   */
  async remove(path: string): Promise<void> {
    const virtual = resolveVirtualPath(path);
    if (ROOTS.includes(virtual)) {
      throw new SandboxError("is_directory", `${virtual} is one of the sandbox's folders and cannot be removed.`);
    }
    const cut = virtual.lastIndexOf("/");
    const { backend: parent } = await this.#realInside(this.backend.toBackend(virtual.slice(0, cut)), path);
    const target = this.backend.join(parent, virtual.slice(cut + 1));
    let kind: BackendKind;
    try {
      kind = (await this.backend.lstat(target)).kind;
    } catch (error) {
      const code = this.backend.errorCode(error);
      if (code === "ENOENT" || code === "ENOTDIR") {
        throw new SandboxError("not_found", `File ${virtual} does not exist. List the directory to see what is there.`);
      }
      throw error;
    }
    if (kind === "directory") {
      throw new SandboxError("is_directory", `${virtual} is a directory; only files can be removed.`);
    }
    await this.backend.unlink(target);
  }

  async exists(path: string): Promise<boolean> {
    return (await this.#kind(await this.resolve(path))) !== undefined;
  }

  /** Entries below `path`, sorted by path; depth 1 = direct children (default DEFAULT_LIST_DEPTH). */
  async list(path: string, options?: { depth?: number }): Promise<DirEntry[]> {
    const resolved = await this.resolve(path);
    const { virtual, backend } = resolved;
    const st = await this.#kind(resolved);
    if (!st) throw new SandboxError("not_found", `Directory ${virtual} does not exist.`);
    if (st.kind !== "directory") throw new SandboxError("not_found", `${virtual} is a file, not a directory; read it instead.`);
    const depth = Math.max(1, Math.floor(options?.depth ?? DEFAULT_LIST_DEPTH));
    const out: DirEntry[] = [];
    await this.#walk(virtual, backend, depth, out);
    return out.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  }

  async #walk(virtualDir: string, backendDir: string, depth: number, out: DirEntry[]): Promise<void> {
    const b = this.backend;
    for (const child of await b.readdir(backendDir)) {
      const childVirtual = `${virtualDir}/${child.name}`;
      const childBackend = b.join(backendDir, child.name);
      const kind = child.kind;
      if (kind === "symlink") {
        // Shown as what it points to when that stays inside; never followed deeper, so no loops.
        const real = await b.realpath(childBackend).catch(() => undefined);
        if (real === undefined || !b.containsReal(real)) continue;
        const target = await b.stat(childBackend).catch(() => undefined);
        if (!target || (target.kind !== "file" && target.kind !== "directory")) continue;
        out.push({ path: childVirtual, name: child.name, type: target.kind, ...(target.kind === "file" ? { size: target.size } : {}) });
        continue;
      }
      if (kind === "file") {
        const size = (await b.stat(childBackend).catch(() => ({ size: 0 }))).size;
        out.push({ path: childVirtual, name: child.name, type: "file", size });
      } else if (kind === "directory") {
        out.push({ path: childVirtual, name: child.name, type: "directory" });
        if (depth > 1) await this.#walk(childVirtual, childBackend, depth - 1, out);
      }
    }
  }
}

/**
 * What the virtual and local sandboxes share apart from how a command runs: the file API over a
 * FileBackend, and refusing every call once the registry has released the sandbox.
 */
export abstract class FileBackedSandbox implements Sandbox {
  readonly #files: SandboxFileOps;
  #released = false;

  constructor(
    readonly id: string,
    readonly scope: SandboxScope,
    backend: FileBackend,
  ) {
    this.#files = new SandboxFileOps(backend);
  }

  abstract exec(command: string, options?: ExecOptions): Promise<ExecResult>;

  markReleased(): void {
    this.#released = true;
  }

  protected assertLive(): void {
    if (this.#released) {
      throw new SandboxError(
        "sandbox_unavailable",
        `Sandbox ${this.id} was released. Acquire the sandbox of user "${this.scope.userId}" and thread "${this.scope.threadId}" again.`,
      );
    }
  }

  /** An exec's working directory (the workspace unless `cwd` names another), which must exist. */
  protected workingDirectory(cwd: string | undefined): Promise<{ virtual: string; backend: string }> {
    return this.#files.workingDirectory(cwd ?? VIRTUAL_DIRS.workspace);
  }

  async readFile(path: string): Promise<string> {
    this.assertLive();
    return this.#files.readFile(path);
  }

  async readFileBytes(path: string): Promise<Uint8Array> {
    this.assertLive();
    return this.#files.readFileBytes(path);
  }

  async writeFile(path: string, content: string, options?: { append?: boolean }): Promise<void> {
    this.assertLive();
    return this.#files.writeFile(path, content, options);
  }

  async writeFileBytes(path: string, bytes: Uint8Array): Promise<void> {
    this.assertLive();
    return this.#files.writeFileBytes(path, bytes);
  }

  async remove(path: string): Promise<void> {
    this.assertLive();
    return this.#files.remove(path);
  }

  async list(path: string, options?: { depth?: number }): Promise<DirEntry[]> {
    this.assertLive();
    return this.#files.list(path, options);
  }

  async exists(path: string): Promise<boolean> {
    this.assertLive();
    return this.#files.exists(path);
  }
}
