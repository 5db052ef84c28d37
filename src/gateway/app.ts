import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { Hono, type MiddlewareHandler } from "hono";
import { cors } from "hono/cors";
import type { LeadConfig } from "../agents/app-config.ts";
import { systemClock } from "../core/clock.ts";
import { mapEnv } from "../core/env.ts";
import { errorMessage } from "../core/errors.ts";
import { newId } from "../core/ids.ts";
import type { ExtensionDiagnostic } from "../extensions/diagnostics.ts";
import { EMPTY_EXTENSIONS, type LoadedExtensions } from "../extensions/registry.ts";
import type { ConnectionInfo } from "../ports/http-server.ts";
import type { KeyValue } from "../ports/key-value.ts";
import type { Clock, Env } from "../ports/runtime-ports.ts";
import type { SandboxProvider } from "../ports/sandbox.ts";
import { createLeadAgentFactory, leadAgentExtras, type LeadAgentFactory } from "../runtime/agent-factory.ts";
import { KeyValueCheckpointSaver } from "../runtime/kv-checkpointer.ts";
import { servedAgentFactory } from "../runtime/served-agent.ts";
import { LeaseFence, runSaver } from "../runtime/runs/fence.ts";
import type { RunCoordination, RunManager } from "../runtime/runs/manager.ts";
import { allCheckpointWritesSettled } from "../runtime/runs/settle.ts";
import { KeyValueThreadStore } from "../runtime/thread-store.ts";
import { CustomAgentStore } from "../runtime/custom-agents.ts";
import type { VersionedKeyValue } from "../ports/versioned-key-value.ts";
import { versionedOver } from "../storage/versioned.ts";
import { createVirtualSandboxProvider } from "../sandbox/virtual.ts";
import { hostPolicy } from "../agents/lead-agent.ts";
import type { AgentMiddleware, AgentTool } from "../engine/types.ts";
import { withoutAmbientRun } from "../engine/ambient.ts";
import type { AuthorizationProvider } from "../authz/provider.ts";
import { parseGatewayConfig } from "../config/gateway.ts";
import { connectionAddress, rememberConnection } from "./auth/client-address.ts";
import { createAuthLayer } from "./auth/layer.ts";
import { createGatewayAuthorizer, type GatewayAuthorizer } from "./auth/authorizer.ts";
import { createExtensionServices, extensionSessionFactory } from "./extension-services.ts";
import { DetachedObservations } from "../extensions/detached.ts";
import { mountExtensionRouters } from "./extension-routers.ts";
import { installGatewayPrincipalResolver } from "./principal-resolver.ts";
import { registerModelRoutes } from "./routes/models.ts";
import { registerFileRoutes } from "./routes/files.ts";
import { registerRunsPart, type RunsPartOptions } from "./routes/runs.ts";
import { registerRunActionRoutes } from "./routes/run-actions.ts";
import { registerThreadToolRoutes, type ThreadToolRoutes } from "./routes/thread-tools.ts";
import { consoleLogger, errorResponse, type GatewayLogger } from "./errors.ts";
import { methodNotAllowedOr } from "./method-not-allowed.ts";
import { createRequestLimits } from "./request-limits.ts";
import { createRouteGuard } from "./route-guard.ts";
import { registerAssistantRoutes } from "./routes/assistants.ts";
import { registerHealthRoute, registerSystemRoutes } from "./routes/system.ts";
import { registerThreadRoutes } from "./routes/threads.ts";
import { registerAgentRoutes } from "./routes/agents.ts";
import { registerAssistRoutes } from "./routes/assist.ts";
import { registerFeatureRoutes } from "./routes/features.ts";
import { registerUnsupportedRoutes } from "./routes/unsupported.ts";
import { registerSkillRoutes } from "./routes/skills.ts";
import type { DeploymentFiles } from "../ports/deployment-files.ts";
import { registerMemoryRoutes } from "./routes/memory.ts";
import { registerMcpRoutes } from "./routes/mcp.ts";
import { LiveMcpConfig } from "../mcp/live-config.ts";
import {
  type AgentFactory,
  type AgentFactoryOption,
  type GatewayEnv,
  type GatewayUser,
  type RouteGuard,
  type ThreadRecord,
  type ThreadStore,
} from "./types.ts";
import type { GatewayDeps, GatewayDiagnostic, GatewayRunHooks } from "./deps.ts";

export type { GatewayDeps, GatewayDiagnostic, GatewayRunHooks } from "./deps.ts";

/**
 * Authentication and CSRF, provided by the auth module (src/gateway/auth/). `csrf` runs before
 * `authenticate`, so an unauthenticated POST without a CSRF pair is a 403, as upstream.
 */
export interface GatewayAuthLayer {
  readonly csrf: MiddlewareHandler<GatewayEnv>;
  readonly authenticate: MiddlewareHandler<GatewayEnv>;
  /** Registers the auth routes (`/api/v1/auth/*`) with the host routes, before any other. */
  register?(app: Hono<GatewayEnv>): void;
  /** Route and model permissions; default: from the config's `authorization:` section. */
  readonly authorizer?: GatewayAuthorizer;
}

/** Running extension services; stopped in reverse order after the run drain. */
export interface GatewayServices {
  stop(): Promise<void>;
}

export interface GatewayOptions {
  readonly config: LeadConfig;
  /**
   * Where threads, checkpoints and runs live (fs on a server, memory in tests). Closed at shutdown,
   * and also when createGateway fails after the extension services started.
   */
  readonly storage: KeyValue;
  readonly env?: Env;
  readonly clock?: Clock;
  readonly logger?: GatewayLogger;
  /** Default: a KeyValueCheckpointSaver over `storage`. */
  readonly checkpointer?: BaseCheckpointSaver;
  /**
   * Compare-and-set over `storage`'s keys, shared by every worker of a deployment (PostgreSQL, Deno
   * KV): thread rows, memory records, the JWT secret, login counters and sandbox snapshots are
   * written through it. Default: the in-process one over `storage` (one process).
   */
  readonly versioned?: VersionedKeyValue;
  /** Default: a KeyValueThreadStore over `storage`. */
  readonly threads?: ThreadStore;
  /**
   * Default: the lead agent per caller, cached by the whole principal. A factory may return the
   * engine's Agent or a bare compiled LangGraph graph, which the gateway runs on its own checkpointer.
   */
  readonly agentFactory?: AgentFactoryOption;
  /** Default: the virtual sandbox over `storage`. */
  readonly sandbox?: SandboxProvider;
  /** The writable skills folder `POST /api/skills/install` unpacks into; absent: installing answers 501. */
  readonly skillsFolder?: DeploymentFiles;
  readonly extensions?: LoadedExtensions;
  /**
   * Default: the `gateway.auth` section of the config (disabled: every caller is the admin
   * `default`, allowed only on a loopback address).
   */
  readonly authLayer?: GatewayAuthLayer;
  /** Where the server will listen: auth disabled off a loopback address refuses to start. */
  readonly listening?: { readonly host: string };
  /** A custom AuthorizationProvider object, used instead of the configured one. */
  readonly authorizationProvider?: AuthorizationProvider;
  /** More tools for every lead agent (an embedder's own). */
  readonly extraTools?: readonly AgentTool[];
  /**
   * extensions_config.json: served and written by /api/mcp/config, and its MCP servers' tools given
   * to every run as the file is then. Default: no file (no MCP tools; writes refused).
   */
  readonly mcpConfig?: LiveMcpConfig;
  /** Middlewares named in config (`extensions.middlewares`), already loaded. */
  readonly configuredMiddlewares?: readonly AgentMiddleware[];
  /** Told of every extension diagnostic as it happens (they are also kept in `diagnostics`). */
  readonly onDiagnostic?: (diagnostic: GatewayDiagnostic) => void;
  /**
   * Where runs are coordinated when this gateway is one of several processes over one store
   * (default: in this process's memory, which is right for one process only).
   */
  readonly coordination?: RunCoordination;
  /** Knobs of the runs part (heartbeat, stream bridge, recursion limit). */
  readonly runs?: RunsPartOptions;
  /** Origins allowed cross-origin (with credentials); default `GATEWAY_CORS_ORIGINS`, comma-separated. No CORS at all when empty. */
  readonly corsOrigins?: readonly string[];
  readonly version?: string;
  /** Run drain budget at shutdown; default 5000 ms. */
  readonly drainTimeoutMs?: number;
  /** Replaces the default start of the extensions' services (registration order, fail-open). */
  startServices?(deps: GatewayDeps): Promise<GatewayServices | void>;
  /** Replaces the default runs and files routes under /api (after the thread and assistant routes). */
  registerExtraRoutes?(api: Hono<GatewayEnv>, deps: GatewayDeps): GatewayRunHooks | void | Promise<GatewayRunHooks | void>;
  /**
   * Nonstandard path converters contributed routes may use (`{code:isbn}`), name → one-segment
   * regex, as mountExtensionRouters' `converters`: checked when the routers mount (a bad one fails
   * createGateway naming the converter), used only by the default mounting.
   */
  readonly routeConverters?: Readonly<Record<string, string>>;
  /** Replaces the default mounting of the extensions' routers (after every host route including /health). */
  mountExtensionRouters?(app: Hono<GatewayEnv>, deps: GatewayDeps): void | Promise<void>;
}

export interface Gateway {
  readonly app: Hono<GatewayEnv>;
  /** Answers one request; `info` (from the server adapter) names the client for login throttling, absent for in-process calls. */
  fetch(request: Request, info?: ConnectionInfo): Promise<Response>;
  readonly deps: GatewayDeps;
  readonly diagnostics: readonly GatewayDiagnostic[];
  /** The RunManager behind /api runs (absent when `registerExtraRoutes` replaced the runs part without returning one). */
  readonly runs: RunManager<GatewayUser> | undefined;
  /** Drains runs (5 s), stops services in reverse, then closes agents, sandbox and storage. Idempotent. */
  shutdown(): Promise<void>;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
/** Headers a cross-origin client must be able to read: the SDK takes the run id from Content-Location. */
export const EXPOSED_HEADERS: readonly string[] = Object.freeze([
  "Content-Location",
  "Location",
  "X-Pagination-Total",
  "X-Pagination-Next",
  "X-Request-ID",
]);

function corsOriginsFrom(options: GatewayOptions, env: Env, configured: readonly string[]): string[] {
  if (options.corsOrigins) return [...options.corsOrigins];
  const fromEnv = (env.get("GATEWAY_CORS_ORIGINS") ?? "")
    .split(",")
    .map((origin) => origin.trim())
    .filter(Boolean);
  return [...new Set([...configured, ...fromEnv])];
}

/**
 * The gateway: one Hono app speaking the LangGraph Platform API under /api. Middleware, outermost
 * first: request id, CORS (only with configured origins), CSRF, auth. Routes in order: auth routes,
 * /api (system, threads, assistants, then the extra routes), /health, then extension routers, so a
 * host route always wins a clash.
 */
export async function createGateway(options: GatewayOptions): Promise<Gateway> {
  const started: { teardown?: () => Promise<void> } = {};
  try {
    return await buildGateway(options, started);
  } catch (error) {
    // Whatever started before the failure (services, storage) would otherwise outlive a gateway
    // that nobody holds and so nobody can shut down.
    await started.teardown?.();
    throw error;
  }
}

async function buildGateway(options: GatewayOptions, started: { teardown?: () => Promise<void> }): Promise<Gateway> {
  const env = options.env ?? mapEnv({});
  const clock = options.clock ?? systemClock;
  const logger = options.logger ?? consoleLogger;
  const { storage, config } = options;
  const extensions = options.extensions ?? EMPTY_EXTENSIONS;
  const diagnostics: GatewayDiagnostic[] = [];
  const reportDiagnostic = (diagnostic: GatewayDiagnostic) => {
    diagnostics.push(diagnostic);
    options.onDiagnostic?.(diagnostic);
    const log = diagnostic.level === "error" ? logger.error : diagnostic.level === "warning" ? logger.warn : logger.info;
    log(`extension ${diagnostic.source}: ${diagnostic.message}`);
  };

  // One tracked saver for the agents and the runs: a cancelled run's cleanup waits for its saves.
  // Fenced too: a run of this process that lost its lease writes no checkpoint.
  const fence = new LeaseFence(clock);
  const checkpointer = runSaver(options.checkpointer ?? new KeyValueCheckpointSaver({ storage }), fence);
  const versioned = options.versioned ?? versionedOver(storage);
  const threads = options.threads ?? new KeyValueThreadStore({ storage, clock, versioned });
  const guard = createRouteGuard(threads);
  const customAgents = new CustomAgentStore({ storage, versioned, clock });
  const mcpConfig = options.mcpConfig ?? new LiveMcpConfig({ file: { fileName: "extensions_config.json", read: async () => undefined }, readOnlyReason: "this gateway was started without one" });
  // Background observations (a cancelled call's report, compaction, memory extraction after a run):
  // no longer accepted once shutdown has drained the runs, before the memory flush.
  const detachedObservations = new DetachedObservations();
  const ownSandbox = options.sandbox === undefined;
  const sandbox = options.sandbox ?? createVirtualSandboxProvider({ storage, versioned, defaultTimeoutMs: config.sandbox.command_timeout_ms });
  const defaultFactory: LeadAgentFactory | undefined = options.agentFactory
    ? undefined
    : createLeadAgentFactory({
        config,
        env,
        checkpointer,
        services: { clock, storage, versioned, sandbox, env, baseDir: config.storage.base },
        onDiagnostic: reportDiagnostic,
        detachedObservations,
        customAgents,
        liveTools: () => mcpConfig.current(),
        ...leadAgentExtras({ ...options, extensions }),
      });
  const agentFactory: AgentFactory = options.agentFactory ? servedAgentFactory(options.agentFactory, checkpointer) : defaultFactory!;
  const deps: GatewayDeps = {
    config,
    storage,
    versioned,
    env,
    clock,
    logger,
    checkpointer,
    threads,
    guard,
    agentFactory,
    customAgents,
    sandbox,
    extensions,
    reportDiagnostic,
    detachedObservations,
  };

  const gatewayConfig = parseGatewayConfig(config.gateway);
  const corsOrigins = corsOriginsFrom(options, env, gatewayConfig.cors_origins);
  // Built before anything starts: a config that is unsafe to serve (auth off on a public address,
  // a missing API key variable) stops here, before a service or a port.
  const authLayer: GatewayAuthLayer =
    options.authLayer ??
    createAuthLayer({
      config: { ...gatewayConfig, cors_origins: corsOrigins },
      authorization: config.authorization ?? null,
      env,
      clock,
      storage,
      ...(options.versioned === undefined ? {} : { versioned: options.versioned }),
      // Workers coordinated over a shared store (the coordination option) but no shared versioned store.
      severalProcesses: (options as { readonly coordination?: unknown }).coordination !== undefined,
      ...(options.authorizationProvider ? { authorizationProvider: options.authorizationProvider } : {}),
      ...(options.listening ? { listening: options.listening } : {}),
    });
  const authorizer =
    authLayer.authorizer ??
    createGatewayAuthorizer({
      config: config.authorization ?? null,
      ...(options.authorizationProvider ? { provider: options.authorizationProvider } : {}),
    });

  const startServices =
    options.startServices ??
    (async () => {
      const running = createExtensionServices(
        extensions.services,
        // Storage and the versioned store exist by now: the sessions services open write through them.
        { appStore: extensions.appStore, policy: hostPolicy(config), sessionFactory: extensionSessionFactory(versioned) },
        { clock, onDiagnostic: reportDiagnostic },
      );
      // Known before it starts, so a start interrupted by a failure still gets its stop.
      services = running;
      await running.start();
      return running;
    });
  let services: GatewayServices | undefined;
  let runHooks: GatewayRunHooks | undefined;
  let closing: Promise<void> | undefined;
  const drainTimeoutMs = options.drainTimeoutMs ?? 5000;
  const step = async (what: string, fn: () => Promise<unknown> | undefined) => {
    try {
      await fn();
    } catch (error) {
      logger.error(`shutdown: ${what} failed: ${errorMessage(error)}`);
    }
  };
  const teardown = (): Promise<void> => {
    closing ??= (async () => {
      await step("draining runs", () => runHooks?.drain?.(drainTimeoutMs));
      // Spec: "Shutdown stops accepting detached observations before the memory shutdown flush"
      // (closing agents below), after the drain, whose interrupts are still reported; the accepted
      // ones finish (within the drain budget) before the services they may use stop.
      await step("finishing detached observations", async () => {
        if (!(await detachedObservations.close({ timeoutMs: drainTimeoutMs, clock }))) {
          logger.warn(`shutdown: ${detachedObservations.pending} extension observation(s) still running after ${drainTimeoutMs} ms; continuing without them`);
        }
      });
      await step("stopping services", () => services?.stop());
      await step("closing the runs part", () => runHooks?.close?.());
      await step("closing agents", () => defaultFactory?.close());
      if (ownSandbox) await step("closing the sandbox", () => sandbox.close());
      // A drained run's last checkpoint saves may still be on their way to the storage.
      await step("finishing checkpoint saves", () => allCheckpointWritesSettled(checkpointer));
      await step("closing storage", () => storage.dispose());
    })();
    return closing;
  };
  started.teardown = teardown;
  services = (await startServices(deps)) ?? services;

  const requestIds = new WeakMap<Request, string>();
  const app = new Hono<GatewayEnv>();
  app.use(async (c, next) => {
    const incoming = c.req.header("x-request-id");
    const requestId = incoming && REQUEST_ID.test(incoming) ? incoming : newId();
    requestIds.set(c.req.raw, requestId);
    await next();
    try {
      c.res.headers.set("X-Request-ID", requestId);
    } catch {
      // A response with immutable headers (a proxied fetch) is copied once to carry the id.
      c.res = new Response(c.res.body, c.res);
      c.res.headers.set("X-Request-ID", requestId);
    }
  });
  if (corsOrigins.length > 0) {
    app.use(cors({ origin: corsOrigins, credentials: true, exposeHeaders: [...EXPOSED_HEADERS], maxAge: 600 }));
  }
  const requestLimits = createRequestLimits(gatewayConfig.limits);
  app.use(requestLimits.paths);
  app.use(authLayer.csrf);
  app.use(authLayer.authenticate);
  app.use(requestLimits.bodies);
  authLayer.register?.(app);
  registerModelRoutes(app, { config, authorizer });

  const api = new Hono<GatewayEnv>();
  let threadTools: ThreadToolRoutes | undefined;
  registerSystemRoutes(api, options.version === undefined ? {} : { version: options.version });
  registerThreadRoutes(api, {
    threads,
    guard,
    checkpointer,
    agentFactory,
    logger,
    hasActiveRun: (threadId) => runHooks?.hasActiveRun?.(threadId) ?? false,
    reserveThread: async (threadId) => (await runHooks?.reserveThread?.(threadId)) ?? (() => undefined),
    onThreadDeleted: async (thread) => {
      await runHooks?.onThreadDeleted?.(thread);
      await threadTools?.forgetThread(thread.thread_id);
      // The thread's uploads and outputs live in its owner's sandbox; left there, a thread created
      // later with the same id would inherit them.
      if (thread.owner_id) await sandbox.forget?.({ userId: thread.owner_id, threadId: thread.thread_id });
    },
  });
  registerAssistantRoutes(api, { config, createdAt: new Date(clock.now()).toISOString() });
  registerAgentRoutes(api, { customAgents, guard, config });
  registerFeatureRoutes(api);
  registerUnsupportedRoutes(api, { guard });
  registerAssistRoutes(api, { ...deps, authorizer });
  registerSkillRoutes(api, { storage, versioned, config, guard, sandbox, ...(options.skillsFolder ? { skillsFolder: options.skillsFolder } : {}) });
  registerMemoryRoutes(api, { versioned, clock, config });
  registerMcpRoutes(api, { guard, mcp: mcpConfig, env });
  const registerExtraRoutes =
    options.registerExtraRoutes ??
    (async (routes: Hono<GatewayEnv>, gatewayDeps: GatewayDeps): Promise<GatewayRunHooks> => {
      const runsPart = await registerRunsPart(routes, gatewayDeps, {
        ...options.runs,
        fence,
        ...(options.coordination ? { coordination: options.coordination } : {}),
      });
      const limits = gatewayConfig.uploads;
      registerFileRoutes(routes, {
        sandbox,
        guard,
        limits: { maxFiles: limits.max_files, maxFileBytes: limits.max_file_bytes, maxTotalBytes: limits.max_total_bytes },
        hasActiveRun: (threadId) => runsPart.hasActiveRun?.(threadId) ?? false,
        onBodyReleased: () => runsPart.memoryReleased?.(),
      });
      return runsPart;
    });
  runHooks = (await registerExtraRoutes(api, deps)) ?? undefined;
  registerRunActionRoutes(api, {
    checkpointer,
    guard,
    agentFactory,
    ...(runHooks?.runs ? { runs: runHooks.runs } : {}),
    hasActiveRun: (threadId) => runHooks?.hasActiveRun?.(threadId) ?? false,
    reserveThread: async (threadId) => (await runHooks?.reserveThread?.(threadId)) ?? (() => undefined),
  });
  threadTools = registerThreadToolRoutes(api, deps, runHooks);
  // Hono copies a sub-app's routes when it is mounted, so every /api route exists by now.
  app.route("/api", api);
  registerHealthRoute(app);
  const mountRouters =
    options.mountExtensionRouters ??
    ((target: Hono<GatewayEnv>) => {
      if (extensions.routers.length === 0) return;
      // Contributed handlers reach their caller through resolvePrincipal(request): the resolver
      // must be in place before the first route can run.
      installGatewayPrincipalResolver();
      mountExtensionRouters(target, extensions.routers, {
        onDiagnostic: reportDiagnostic,
        ...(options.routeConverters ? { converters: options.routeConverters } : {}),
      });
    });
  await mountRouters(app, deps);

  app.notFound(methodNotAllowedOr(app, (c) => c.json({ detail: "Not found" }, 404)));
  app.onError((error, c) =>
    errorResponse(error, { logger, requestId: requestIds.get(c.req.raw), method: c.req.method, path: c.req.path }),
  );

  return {
    app,
    deps,
    diagnostics,
    runs: runHooks?.runs,
    // Each request starts from an empty run context, whatever the server's loop carried over.
    fetch: async (request, info) =>
      withoutAmbientRun(() => {
        rememberConnection(request, connectionAddress(info));
        return app.fetch(request);
      }),
    shutdown: teardown,
  };
}
