// A small gateway around the run routes, reachable through app.fetch only (no sockets, no node:*),
// so the HTTP contract tests run unchanged on Node, Deno and Bun. It uses the real route guard and
// thread store; the user comes from an `x-test-user` header, permissions from `x-test-deny`.
import { Hono } from "hono";
import { systemClock } from "../../../src/core/clock.ts";
import type { LoadedExtensions } from "../../../src/extensions/registry.ts";
import { createRouteGuard } from "../../../src/gateway/route-guard.ts";
import { registerRunRoutes } from "../../../src/gateway/routes/runs.ts";
import { ROUTE_PERMISSIONS, type GatewayEnv, type GatewayUser, type RoutePermission } from "../../../src/gateway/types.ts";
import type { Clock } from "../../../src/ports/runtime-ports.ts";
import { KeyValueCheckpointSaver } from "../../../src/runtime/kv-checkpointer.ts";
import { RunManager } from "../../../src/runtime/runs/manager.ts";
import { MemoryStreamBridge } from "../../../src/runtime/runs/stream-bridge.ts";
import type { RunAgentFactory } from "../../../src/runtime/runs/types.ts";
import { KeyValueThreadStore } from "../../../src/runtime/thread-store.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { deferred, scriptedAgentFactory } from "../runtime/runs-fixtures.ts";

export interface HarnessOptions {
  readonly clock?: Clock;
  readonly extensions?: LoadedExtensions;
  /** Frames the bridge keeps per run. */
  readonly retain?: number;
  readonly heartbeatMs?: number;
  readonly agentFactory?: RunAgentFactory;
}

export function runsHarness(options: HarnessOptions = {}) {
  const clock = options.clock ?? systemClock;
  const storage = createMemoryKeyValue();
  const checkpointer = new KeyValueCheckpointSaver({ storage });
  const threads = new KeyValueThreadStore({ storage, clock });
  const guard = createRouteGuard(threads);
  const gates = { block: deferred<string>() };
  const runs = new RunManager<GatewayUser>({
    storage,
    checkpointer,
    threads,
    agentFactory: options.agentFactory ?? scriptedAgentFactory(checkpointer, { gates }),
    ...(options.extensions ? { extensions: options.extensions } : {}),
    clock,
    bridge: new MemoryStreamBridge({ clock, ...(options.retain ? { retain: options.retain } : {}) }),
    notifyBudgetMs: Infinity,
    modelNames: () => ["demo"],
  });
  const app = new Hono<GatewayEnv>();
  app.use(async (c, next) => {
    const denied = new Set((c.req.header("x-test-deny") ?? "").split(",").filter(Boolean));
    c.set("user", {
      id: c.req.header("x-test-user") ?? "alice",
      systemRole: "user",
      authSource: "api_key",
      isInternal: false,
      permissions: new Set(ROUTE_PERMISSIONS.filter((p: RoutePermission) => !denied.has(p))),
    });
    await next();
  });
  const api = new Hono<GatewayEnv>();
  // Thread creation is the thread routes' job; this stand-in only records the owner.
  api.post("/threads", async (c) => {
    const body = (await c.req.json().catch(() => ({}))) as { thread_id?: string; metadata?: Record<string, unknown> };
    const { thread } = await threads.create({ ...(body.thread_id ? { threadId: body.thread_id } : {}), metadata: body.metadata ?? {}, ownerId: c.get("user").id });
    return c.json(thread);
  });
  registerRunRoutes(api, { runs, threads, guard, ...(options.heartbeatMs ? { heartbeatMs: options.heartbeatMs } : {}) });
  app.route("/api", api);

  const request = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
    app.fetch(
      new Request(`http://gateway.test${path}`, {
        method,
        headers: { "content-type": "application/json", ...headers },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      }),
    );
  return {
    app,
    runs,
    threads,
    checkpointer,
    gates,
    request,
    async thread(id = "t1", user = "alice"): Promise<string> {
      const res = await request("POST", "/api/threads", { thread_id: id }, { "x-test-user": user });
      if (res.status !== 200) throw new Error(`thread create failed: ${res.status}`);
      return id;
    },
  };
}

/**
 * Counts subscriptions, so a test knows every reader has placed its cursor before the run moves
 * on. (Bun sends a streamed response's headers only with its first byte, so an open response is
 * no sign of that there.) The cursor is placed synchronously when the subscription starts.
 */
export class CountingBridge extends MemoryStreamBridge {
  subscriptions = 0;
  override subscribe(...args: Parameters<MemoryStreamBridge["subscribe"]>): ReturnType<MemoryStreamBridge["subscribe"]> {
    this.subscriptions += 1;
    return super.subscribe(...args);
  }
}

export interface SseFrame {
  readonly event?: string;
  readonly data?: unknown;
  readonly id?: string;
  readonly comment?: string;
}

/** Parses an SSE body frame by frame; the caller may stop early (which cancels the body). */
export async function* sseFrames(body: ReadableStream<Uint8Array>): AsyncGenerator<SseFrame> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut: number;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        yield parseBlock(block);
      }
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

function parseBlock(block: string): SseFrame {
  const frame: { event?: string; data?: unknown; id?: string; comment?: string } = {};
  const data: string[] = [];
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) frame.comment = line.slice(1).trim();
    else if (line.startsWith("event: ")) frame.event = line.slice(7);
    else if (line.startsWith("data: ")) data.push(line.slice(6));
    else if (line.startsWith("id: ")) frame.id = line.slice(4);
  }
  if (data.length > 0) frame.data = JSON.parse(data.join("\n"));
  return frame;
}

export async function allFrames(res: Response): Promise<SseFrame[]> {
  const out: SseFrame[] = [];
  for await (const frame of sseFrames(res.body!)) out.push(frame);
  return out;
}

export const human = (text: string) => ({ input: { messages: [{ type: "human", content: text }] } });
