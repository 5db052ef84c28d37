import type { Context } from "hono";
import { isDeploymentAdministrator } from "../runtime/runs/types.ts";
import { isThreadVisibleTo, isValidThreadId } from "../runtime/thread-store.ts";
import { authenticatedUser } from "./auth/context.ts";
import { httpError, threadNotFound } from "./errors.ts";
import type { GatewayEnv, GatewayUser, RoutePermission, RouteGuard, ThreadRecord, ThreadStore } from "./types.ts";

/** Whose threads a listing shows: the caller's own (and ownerless ones). */
export function threadOwnerFilter(user: GatewayUser): string {
  return user.id;
}

/** The owner a new thread is recorded with: whoever created it. */
export function threadOwnerFor(user: GatewayUser): string {
  return user.id;
}

/**
 * Permission first (403 `Permission denied: <perm>`), then ownership: a thread with another owner
 * answers exactly like a missing one (404), so nobody can learn which ids exist. Ownerless rows
 * (written before auth was on) stay readable by everyone who holds the permission. Admins get no
 * bypass: the owner check is about whose conversation it is, not about who runs the server.
 */
export function createRouteGuard(threads: ThreadStore): RouteGuard {
  function permission(c: Context<GatewayEnv>, perm: RoutePermission): void {
    const user = authenticatedUser(c);
    if (!user.permissions.has(perm)) throw httpError(403, `Permission denied: ${perm}`);
  }

  async function thread(
    c: Context<GatewayEnv>,
    perm: RoutePermission,
    threadId: string,
    options?: { readonly requireExisting?: boolean },
  ): Promise<ThreadRecord | undefined> {
    permission(c, perm);
    const user = authenticatedUser(c);
    if (!isValidThreadId(threadId)) {
      throw httpError(422, `Thread id ${JSON.stringify(String(threadId).slice(0, 80))} is not valid: use 1 to 64 letters, digits, "_" or "-".`);
    }
    const row = await threads.get(threadId);
    if (!row) {
      if (options?.requireExisting) throw threadNotFound(threadId);
      return undefined;
    }
    if (!isThreadVisibleTo(row, user.id)) throw threadNotFound(threadId);
    return row;
  }

  function administrator(c: Context<GatewayEnv>, what: string): void {
    const user = authenticatedUser(c);
    if (!isDeploymentAdministrator(user)) {
      throw httpError(403, `Only an administrator may change ${what}; sign in as an admin user (role: admin).`);
    }
  }

  return { thread, permission, administrator };
}
