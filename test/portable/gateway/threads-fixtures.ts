import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { interrupt } from "@langchain/langgraph/web";
import { Client } from "@langchain/langgraph-sdk";
import { validateLeadConfig } from "../../../src/agents/app-config.ts";
import { systemClock } from "../../../src/core/clock.ts";
import { createAgent, type Agent } from "../../../src/engine/index.ts";
import { createGateway, type Gateway, type GatewayAuthLayer, type GatewayOptions } from "../../../src/gateway/app.ts";
import { ROUTE_PERMISSIONS, type GatewayUser, type RoutePermission } from "../../../src/gateway/types.ts";
import { KeyValueCheckpointSaver } from "../../../src/runtime/kv-checkpointer.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";

/**
 * A stand-in for the auth module: the caller is whoever `x-test-user` names, with the role in
 * `x-test-role` and the permissions in `x-test-perms` (all six when absent). No header, no user.
 */
export function headerAuthLayer(): GatewayAuthLayer {
  return {
    csrf: async (_c, next) => {
      await next();
    },
    authenticate: async (c, next) => {
      const id = c.req.header("x-test-user");
      if (id) {
        const role = (c.req.header("x-test-role") ?? "user") as GatewayUser["systemRole"];
        const perms = c.req.header("x-test-perms");
        c.set("user", {
          id,
          systemRole: role,
          authSource: role === "internal" ? "internal" : "api_key",
          isInternal: role === "internal",
          permissions: new Set(perms === undefined ? ROUTE_PERMISSIONS : (perms.split(",").filter(Boolean) as RoutePermission[])),
        });
      }
      await next();
    },
  };
}

export const config = validateLeadConfig({}, "test");

/** The model asking the user, through ask_clarification, to pick metric or imperial units. */
export function askUnits(id = "ask-1"): AIMessage {
  return new AIMessage({
    content: "",
    tool_calls: [{ id, name: "ask_clarification", args: { question: "Metric or imperial units?", clarification_type: "approach_choice", options: ["metric", "imperial"] } }],
  });
}

export async function testGateway(options: Partial<GatewayOptions> = {}): Promise<Gateway> {
  return createGateway({ config, storage: createMemoryKeyValue(), authLayer: headerAuthLayer(), ...options });
}

/** A gateway over `agent` with its own memory storage and checkpointer (the agent's), and a new thread of alice's. */
export async function gatewayWithThread(agent: Agent, storage: ReturnType<typeof createMemoryKeyValue>, checkpointer: KeyValueCheckpointSaver): Promise<{ gateway: Gateway; threadId: string }> {
  const gateway = await testGateway({ storage, checkpointer, agentFactory: async () => agent });
  const { body: thread } = await call(gateway, "POST", "/api/threads", {});
  return { gateway, threadId: (thread as { thread_id: string }).thread_id };
}

export const BASE = "http://gateway.test";

export interface CallOptions {
  readonly user?: string | null;
  readonly role?: GatewayUser["systemRole"];
  readonly perms?: readonly RoutePermission[];
  readonly headers?: Record<string, string>;
}

/** One request through app.fetch, as user `alice` unless told otherwise; the JSON body parsed. */
export async function call(
  gateway: Gateway,
  method: string,
  path: string,
  body?: unknown,
  options: CallOptions = {},
): Promise<{ status: number; body: any; headers: Headers }> {
  const headers = new Headers(options.headers);
  const user = options.user === undefined ? "alice" : options.user;
  if (user !== null) headers.set("x-test-user", user);
  if (options.role) headers.set("x-test-role", options.role);
  if (options.perms) headers.set("x-test-perms", options.perms.join(","));
  if (body !== undefined) headers.set("content-type", "application/json");
  const response = await gateway.fetch(
    new Request(`${BASE}${path}`, { method, headers, ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }) }),
  );
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers };
}

/** The official SDK client, talking to the gateway through app.fetch as `user`. */
export function sdkClient(gateway: Gateway, user = "alice"): Client {
  return new Client({
    apiUrl: `${BASE}/api`,
    apiKey: null,
    defaultHeaders: { "x-test-user": user },
    callerOptions: { maxRetries: 0, fetch: (url: RequestInfo | URL, init?: RequestInit) => gateway.fetch(new Request(url, init)) },
  });
}

/**
 * An agent whose one tool asks the user a question through interrupt(); the same instance serves
 * every caller, so a test can run it directly and read the paused thread through the gateway.
 */
export function interruptingAgent(storage = createMemoryKeyValue()): Agent {
  const ask = {
    name: "ask",
    description: "ask the user",
    schema: { type: "object", properties: {} },
    invoke: async () => `user said ${String(interrupt("continue?"))}`,
  };
  return createAgent({
    model: fakeModel().respondWithTools([{ name: "ask", args: {}, id: "call-1" }]).respond(new AIMessage("thanks")),
    tools: [ask],
    services: { clock: systemClock },
    checkpointer: new KeyValueCheckpointSaver({ storage }),
  });
}

export { HumanMessage };
