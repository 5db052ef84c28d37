import { SandboxError } from "../ports/sandbox.ts";
import type { SandboxScope } from "../ports/sandbox.ts";

/** DeerFlow's id alphabet for users and threads; safe as a host directory name and a storage key segment. */
const SCOPE_ID = /^[A-Za-z0-9_-]{1,128}$/;

/** Refuses ids that could name another directory (`..`, `a/b`) or collide in a storage key (`a:b`). */
export function assertValidScope(scope: SandboxScope): void {
  for (const field of ["userId", "threadId"] as const) {
    const value: unknown = scope?.[field];
    if (typeof value !== "string" || !SCOPE_ID.test(value)) {
      throw new SandboxError(
        "sandbox_unavailable",
        `Invalid sandbox ${field} ${JSON.stringify(value)}: use 1-128 letters, digits, "_" or "-" ` +
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
