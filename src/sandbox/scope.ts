import { SCOPE_ID_MAX, idFormatHint, isScopeId } from "../core/ids.ts";
import { SandboxError } from "../ports/sandbox.ts";
import type { ExecResult, Sandbox, SandboxScope } from "../ports/sandbox.ts";

/**
 * Refuses ids that could name another directory (`..`, `a/b`) or collide in a storage key (`a:b`):
 * both must be scope ids (core/ids.ts), safe as a host directory name and a storage key segment.
 */
export function assertValidScope(scope: SandboxScope): void {
  for (const field of ["userId", "threadId"] as const) {
    const value: unknown = scope?.[field];
    if (!isScopeId(value)) {
      throw new SandboxError(
        "sandbox_unavailable",
        `Invalid sandbox ${field} ${JSON.stringify(value)}: use ${idFormatHint(SCOPE_ID_MAX)} ` +
          `(the ids the gateway assigns, such as a UUID, already fit).`,
      );
    }
  }
}

export function scopeKey(scope: SandboxScope): string {
  return `${scope.userId}:${scope.threadId}`;
}

/** Timeout result shared by the sandbox kinds: exit code 124, as coreutils `timeout` reports it. */
export const TIMEOUT_EXIT_CODE = 124;

export function timeoutMessage(timeoutMs: number): string {
  return `Command timed out after ${timeoutMs} ms and was stopped. Run a shorter command, or pass a larger timeoutMs.`;
}

/** What a command stopped by its timeout returns: its output so far, the reason appended to stderr. */
export function timedOutResult(stdout: string, stderr: string, timeoutMs: number): ExecResult {
  const newline = stderr && !stderr.endsWith("\n") ? "\n" : "";
  return { stdout, stderr: `${stderr}${newline}${timeoutMessage(timeoutMs)}\n`, exitCode: TIMEOUT_EXIT_CODE };
}

interface RegisteredSandbox extends Sandbox {
  markReleased(): void;
}

/**
 * The acquire/release bookkeeping every sandbox kind shares: one sandbox per (user, thread) while
 * acquired, concurrent acquires of one scope share a single open, a failed open is forgotten so
 * the next acquire retries, and nothing is handed out after close.
 */
export class SandboxRegistry<S extends RegisteredSandbox> {
  readonly #byScope = new Map<string, Promise<S>>();
  readonly #byId = new Map<string, S>();
  readonly #open: (scope: SandboxScope) => Promise<S>;
  #closed = false;

  constructor(open: (scope: SandboxScope) => Promise<S>) {
    this.#open = open;
  }

  acquire(scope: SandboxScope): Promise<S> {
    if (this.#closed) {
      return Promise.reject(new SandboxError("sandbox_unavailable", "This sandbox provider was closed. Create a new provider."));
    }
    try {
      assertValidScope(scope);
    } catch (error) {
      return Promise.reject(error);
    }
    const key = scopeKey(scope);
    let pending = this.#byScope.get(key);
    if (!pending) {
      const opening = this.#open(scope).then((sandbox) => {
        this.#byId.set(sandbox.id, sandbox);
        return sandbox;
      });
      pending = opening;
      this.#byScope.set(key, opening);
      opening.catch(() => {
        if (this.#byScope.get(key) === opening) this.#byScope.delete(key);
      });
    }
    return pending;
  }

  get(sandboxId: string): S | undefined {
    return this.#byId.get(sandboxId);
  }

  /** Marks the sandbox released and forgets it; undefined when it was not acquired. */
  release(sandboxId: string): S | undefined {
    const sandbox = this.#byId.get(sandboxId);
    if (!sandbox) return undefined;
    this.#byId.delete(sandboxId);
    this.#byScope.delete(scopeKey(sandbox.scope));
    sandbox.markReleased();
    return sandbox;
  }

  /**
   * Drops the sandbox of `scope` (waiting for an open in flight) and marks it released; undefined
   * when none was acquired. Nothing is saved: the caller is discarding the scope's files.
   */
  async forget(scope: SandboxScope): Promise<S | undefined> {
    assertValidScope(scope);
    const key = scopeKey(scope);
    const pending = this.#byScope.get(key);
    if (!pending) return undefined;
    this.#byScope.delete(key);
    const sandbox = await pending.catch(() => undefined);
    if (!sandbox) return undefined;
    this.#byId.delete(sandbox.id);
    sandbox.markReleased();
    return sandbox;
  }

  /** Refuses further acquires and releases everything still acquired, returning it. */
  close(): S[] {
    this.#closed = true;
    return [...this.#byId.keys()].map((id) => this.release(id)!);
  }
}
