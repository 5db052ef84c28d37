// A small gateway around the thread file routes, for the portable (app.fetch) and socket tests.
import { Hono } from "hono";
import { HTTPException } from "hono/http-exception";
import { afterEach } from "vitest";
import { registerFileRoutes } from "../../../src/gateway/routes/files.ts";
import type { FileRoutesDeps, UploadLimits } from "../../../src/gateway/routes/files.ts";
import { ROUTE_PERMISSIONS } from "../../../src/gateway/types.ts";
import type { GatewayEnv, GatewayUser, RouteGuard, RoutePermission, ThreadRecord } from "../../../src/gateway/types.ts";
import type { KeyValue } from "../../../src/ports/key-value.ts";
import type { Sandbox, SandboxProvider } from "../../../src/ports/sandbox.ts";
import { createVirtualSandboxProvider } from "../../../src/sandbox/virtual.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";

export const BASE = "http://gateway.test";
export const T = "thread-1";
export const enc = new TextEncoder();

export interface Harness {
  app: Hono<GatewayEnv>;
  provider: SandboxProvider;
  threads: Map<string, ThreadRecord>;
  activeRuns: Set<string>;
  guardCalls: Array<{ permission: RoutePermission; threadId: string; requireExisting: boolean }>;
  sandboxOf(userId: string, threadId?: string): Promise<Sandbox>;
  request(path: string, init?: RequestInit & { user?: string; deny?: RoutePermission[] }): Promise<Response>;
  upload(files: Array<File | string>, init?: { user?: string; deny?: RoutePermission[]; threadId?: string; field?: string }): Promise<Response>;
}

const providers: SandboxProvider[] = [];
afterEach(async () => {
  await Promise.all(providers.splice(0).map((p) => p.close()));
});

export function thread(id: string, ownerId: string | null): ThreadRecord {
  const now = new Date(0).toISOString();
  return { thread_id: id, created_at: now, updated_at: now, metadata: {}, status: "idle", owner_id: ownerId };
}

function userFrom(headers: Headers): GatewayUser {
  const deny = new Set((headers.get("x-test-deny") ?? "").split(",").filter(Boolean));
  return {
    id: headers.get("x-test-user") ?? "alice",
    systemRole: "user",
    authSource: "api_key",
    isInternal: false,
    permissions: new Set(ROUTE_PERMISSIONS.filter((p) => !deny.has(p))),
  };
}

/**
 * A small gateway: a test auth layer that stamps the user from headers, and the guard the real one
 * implements (permission, then ownership: another owner's thread is a 404).
 */
export function harness(options: { limits?: Partial<UploadLimits>; withActiveRuns?: boolean; storage?: KeyValue; withoutUploadStore?: boolean } = {}): Harness {
  const virtual = createVirtualSandboxProvider({ storage: options.storage ?? createMemoryKeyValue() });
  // A provider with no upload store of its own (a remote sandbox): uploads go through its sandbox.
  const provider: SandboxProvider = options.withoutUploadStore ? { ...virtual, uploads: undefined } : virtual;
  providers.push(provider);
  const threads = new Map<string, ThreadRecord>([[T, thread(T, "alice")]]);
  const activeRuns = new Set<string>();
  const guardCalls: Harness["guardCalls"] = [];
  const guard: RouteGuard = {
    async thread(c, permission, threadId, opts) {
      guardCalls.push({ permission, threadId, requireExisting: opts?.requireExisting === true });
      const user = c.get("user");
      if (!user.permissions.has(permission)) throw new HTTPException(403, { message: `Permission denied: ${permission}` });
      const row = threads.get(threadId);
      if ((row && row.owner_id !== null && row.owner_id !== user.id) || (!row && opts?.requireExisting)) {
        throw new HTTPException(404, { message: `Thread ${threadId} not found` });
      }
      return row;
    },
    permission(c, permission) {
      if (!c.get("user").permissions.has(permission)) throw new HTTPException(403, { message: `Permission denied: ${permission}` });
    },
    administrator(c, what) {
      if (c.get("user").systemRole !== "admin") throw new HTTPException(403, { message: `Only an administrator may change ${what}` });
    },
  };
  const deps: FileRoutesDeps = {
    sandbox: provider,
    guard,
    ...(options.limits ? { limits: options.limits } : {}),
    ...(options.withActiveRuns ? { hasActiveRun: (id: string) => activeRuns.has(id) } : {}),
  };
  const app = new Hono<GatewayEnv>();
  app.use("*", async (c, next) => {
    c.set("user", userFrom(c.req.raw.headers));
    await next();
  });
  // What the gateway's onError does with a bare HTTPException: `{detail: message}`.
  app.onError((error, c) => {
    if (error instanceof HTTPException) return c.json({ detail: error.message }, error.status);
    return c.json({ detail: String(error) }, 500);
  });
  const api = new Hono<GatewayEnv>();
  registerFileRoutes(api, deps);
  app.route("/api", api);

  const request: Harness["request"] = async (path, init = {}) => {
    const { user, deny, ...rest } = init;
    const headers = new Headers(rest.headers);
    if (user) headers.set("x-test-user", user);
    if (deny?.length) headers.set("x-test-deny", deny.join(","));
    return app.fetch(new Request(`${BASE}${path}`, { ...rest, headers }));
  };
  return {
    app,
    provider,
    threads,
    activeRuns,
    guardCalls,
    sandboxOf: (userId, threadId = T) => provider.acquire({ userId, threadId }),
    request,
    upload(files, init = {}) {
      const form = new FormData();
      for (const file of files) form.append(init.field ?? "files", file);
      return request(`/api/threads/${init.threadId ?? T}/uploads`, {
        method: "POST",
        body: form,
        ...(init.user ? { user: init.user } : {}),
        ...(init.deny ? { deny: init.deny } : {}),
      });
    },
  };
}

export function file(name: string, content: string | Uint8Array, type = ""): File {
  return new File([typeof content === "string" ? content : new Uint8Array(content)], name, { type });
}

export async function bytesOf(response: Response): Promise<number[]> {
  return [...new Uint8Array(await response.arrayBuffer())];
}

export async function detailOf(response: Response): Promise<string> {
  return ((await response.json()) as { detail: string }).detail;
}

export async function uploadsOf(h: Harness, userId = "alice"): Promise<string[]> {
  return (await (await h.sandboxOf(userId)).list("/mnt/user-data/uploads", { depth: 1 })).map((e) => e.name);
}

