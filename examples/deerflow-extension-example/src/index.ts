/*
 * deerflow-extension-example: one contribution of each of the seven kinds, all feeding one
 * bounded event log that the extension's own routes serve.
 *
 * The only import is the public contract. It is a relative path into this repository for now
 * because the contract is not published as its own package yet; once it is, this line becomes
 * `from "deerflow-extension-api"` and the package lists it as a peer dependency.
 *
 * Every contribution is observation only: the host isolates contributed middlewares and contains
 * every observer, so nothing here can change a run's outcome — and nothing here tries to.
 */
import {
  AgentScope,
  Placement,
  dataKey,
  extension,
  requireAdmin,
  resolvePrincipal,
  taskStoreFrom,
  type AgentAssemblyObserver,
  type ContextCompactionObserver,
  type ExtensionData,
  type ExtensionInstall,
  type ExtensionRegistry,
  type ExtensionRoute,
  type ExtensionService,
  type MiddlewareContributor,
  type SystemModelCallObserver,
  type TaskLifecycleContributor,
} from "../../../src/extension-api/index.ts";

export const EXTENSION_NAME = "deerflow-extension-example";
export const MIDDLEWARE_NAME = "example_model_call_counter";
const DEFAULT_MAX_EVENTS = 200;

/** One thing the extension saw. JSON-safe, so the events route can return it as-is. */
export type ExampleEvent =
  | { readonly type: "task_start"; readonly taskId: string; readonly kind: string; readonly threadId: string }
  | { readonly type: "task_stop"; readonly taskId: string; readonly outcome: string; readonly modelCalls: number }
  | { readonly type: "system_model_call"; readonly kind: string; readonly ok: boolean; readonly messages: number; readonly durationMs: number }
  | { readonly type: "agent_assembled"; readonly agentName: string; readonly middlewares: readonly string[] }
  | { readonly type: "context_compacted"; readonly compacted: number; readonly kept: number; readonly scope: string }
  | { readonly type: "service"; readonly state: "started" | "stopped" };

/** Per-task model call count, in the task store the host hands both the middleware and the lifecycle hooks. */
const MODEL_CALLS = dataKey<{ count: number }>("deerflow-extension-example/model-calls");

/** What the wrapper needs of a model request: only where to find the task store. */
interface ModelCallRequest {
  readonly runtime?: unknown;
}

function configuredMaxEvents(config: Readonly<Record<string, unknown>>): number {
  const value = config["max_events"];
  return typeof value === "number" && Number.isInteger(value) && value > 0 ? value : DEFAULT_MAX_EVENTS;
}

function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

function installExample(registry: ExtensionRegistry, config: Readonly<Record<string, unknown>>): void {
  // State lives per install, not in module globals: a host that loads the extension twice (two
  // plugins entries, two configs) gets two independent logs.
  const maxEvents = configuredMaxEvents(config);
  const events: ExampleEvent[] = [];
  const record = (event: ExampleEvent): void => {
    events.push(event);
    if (events.length > maxEvents) events.splice(0, events.length - maxEvents);
  };
  let serviceStarted = false;

  // 1. Middleware contributor: counts provider calls. MODEL_PHYSICAL sits inside retries, so a
  //    retried call counts once per attempt — the number that matches the provider's bill.
  const middlewares: MiddlewareContributor = {
    contributeMiddlewares() {
      return [
        {
          middleware: {
            name: MIDDLEWARE_NAME,
            async wrapModelCall(request: ModelCallRequest, handler: (request: ModelCallRequest) => Promise<unknown>) {
              const response = await handler(request);
              const store = taskStoreFrom(request.runtime);
              if (store) store.getOrInit(MODEL_CALLS, () => ({ count: 0 })).count += 1;
              return response;
            },
          },
          placement: Placement.MODEL_PHYSICAL,
          scope: AgentScope.BOTH,
        },
      ];
    },
  };

  // 2. Task lifecycle: the stop hook reads what the middleware counted in the same task store.
  const lifecycle: TaskLifecycleContributor = {
    onTaskStart(_appStore: ExtensionData, taskStore: ExtensionData, info) {
      taskStore.set(MODEL_CALLS, { count: 0 });
      record({ type: "task_start", taskId: info.taskId, kind: info.kind, threadId: info.threadId });
    },
    onTaskStop(_appStore: ExtensionData, taskStore: ExtensionData, info, outcome) {
      record({ type: "task_stop", taskId: info.taskId, outcome, modelCalls: taskStore.get(MODEL_CALLS)?.count ?? 0 });
    },
  };

  // 3. System model calls (title, memory, goal, summarization): never the response text itself,
  //    which may hold user data, only its shape.
  const systemModelObserver: SystemModelCallObserver = {
    onSystemModelCall(_appStore, _taskStore, kind, request, result) {
      record({ type: "system_model_call", kind, ok: result.error === undefined, messages: request.messages.length, durationMs: result.durationMs });
    },
  };

  // 4. Agent assembly: which middlewares the agent was built with, outermost first.
  const assemblyObserver: AgentAssemblyObserver = {
    onAgentAssembled(descriptor) {
      record({ type: "agent_assembled", agentName: descriptor.agent_name, middlewares: descriptor.middlewares.map((m) => m.name) });
    },
  };

  // 5. Context compaction: how much history a summary replaced.
  const compactionObserver: ContextCompactionObserver = {
    // No task is live when history is compacted: taskStore is a detached one ("detached").
    onContextCompacted(event, taskStore) {
      record({ type: "context_compacted", compacted: event.compacted_message_count, kept: event.kept_message_count, scope: taskStore.scopeId });
    },
  };

  // 6. A gateway-lifetime service. Real ones open connections here; stop must cope with a start
  //    that failed halfway, because the host still calls it.
  const service: ExtensionService = {
    name: "example-recorder",
    async start() {
      serviceStarted = true;
      record({ type: "service", state: "started" });
    },
    async stop() {
      serviceStarted = false;
      record({ type: "service", state: "stopped" });
    },
  };

  // 7. An eager router. The host mounts it after its own routes, behind session auth and CSRF.
  const routes: ExtensionRoute[] = [
    {
      method: "GET",
      path: "/example/ping",
      handler(_request, ctx) {
        const principal = resolvePrincipal(ctx);
        return json({ ok: true, extension: EXTENSION_NAME, user: principal.userId, serviceStarted, events: events.length });
      },
    },
    {
      // The log reveals other users' task ids, so only an administrator may read it.
      method: "GET",
      path: "/example/events",
      handler(_request, ctx) {
        requireAdmin(ctx);
        return json({ events });
      },
    },
  ];

  registry.middlewares(middlewares);
  registry.taskLifecycle(lifecycle);
  registry.systemModelObserver(systemModelObserver);
  registry.agentAssemblyObserver(assemblyObserver);
  registry.contextCompactionObserver(compactionObserver);
  registry.service(service);
  registry.routers(routes);
}

/** The entry point named by package.json's `deerflow.extension` and by config.yaml's `plugins[].use`. */
export const install: ExtensionInstall = extension({ api: "0.1", name: EXTENSION_NAME })(installExample);
