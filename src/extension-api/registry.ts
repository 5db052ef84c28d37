import { ExtensionApiError } from "./errors.ts";
import type { AgentAssemblyDescriptor } from "./assembly.ts";
import type { ContextCompactionObserver } from "./compaction.ts";
import type { TaskLifecycleContributor } from "./lifecycle.ts";
import type { AgentScope, Placement } from "./placement.ts";
import type { HostPolicySnapshot } from "./policy.ts";
import type { ExtensionRoute, ExtensionService } from "./services.ts";
import type { SystemModelCallObserver } from "./system-model.ts";
import type { ExtensionData } from "./task-store.ts";
import { isApiVersion } from "./version.ts";

/** What the host knows about the agent being built when it asks contributors for middlewares. */
export interface AgentBuildContext {
  /** `lead` or `subagent`: the agent being built, never `both`. */
  readonly scope: AgentScope;
  readonly agentName: string;
  readonly modelName: string;
  readonly policy: HostPolicySnapshot;
}

/**
 * One contributed middleware and where it goes. `middleware` is an AgentMiddleware-shaped plain
 * object (`name` plus hooks); the contract carries no framework types, the host validates the shape.
 */
export interface MiddlewarePlacement {
  readonly middleware: unknown;
  readonly placement: Placement;
  /** Which agents get it; default `both`. */
  readonly scope?: AgentScope;
  /** Among contributions at one anchor, lower sits outer; ties keep registration order. Default 0. */
  readonly order?: number;
}

/**
 * Asked once per agent build. Synchronous on purpose: agent assembly must not wait on an
 * extension's I/O; do that in a service and read its result here.
 */
export interface MiddlewareContributor {
  contributeMiddlewares(appStore: ExtensionData, ctx: AgentBuildContext): readonly MiddlewarePlacement[];
}

/** Told synchronously at the end of every agent build; a throwing observer is reported and skipped. */
export interface AgentAssemblyObserver {
  onAgentAssembled(descriptor: AgentAssemblyDescriptor): void;
}

/**
 * What `install` receives: write-only, exactly the seven contribution kinds the host runs. There
 * is deliberately no way to read back what was registered, and no method the host would ignore.
 */
export interface ExtensionRegistry {
  middlewares(contributor: MiddlewareContributor): void;
  taskLifecycle(contributor: TaskLifecycleContributor): void;
  systemModelObserver(observer: SystemModelCallObserver): void;
  agentAssemblyObserver(observer: AgentAssemblyObserver): void;
  contextCompactionObserver(observer: ContextCompactionObserver): void;
  service(service: ExtensionService): void;
  /** One router: its routes are mounted, or rejected, together. */
  routers(routes: readonly ExtensionRoute[]): void;
}

/** The seven registration method names, in contract order. */
export const REGISTRATION_METHODS = Object.freeze([
  "middlewares",
  "taskLifecycle",
  "systemModelObserver",
  "agentAssemblyObserver",
  "contextCompactionObserver",
  "service",
  "routers",
] as const satisfies readonly (keyof ExtensionRegistry)[]);

/**
 * An extension's entry point, named in config.yaml as `plugins[].use: "module:Export"`. It receives
 * a shallow copy of its `plugins[].config` mapping. If it throws (or rejects), everything it
 * registered is undone.
 */
export type ExtensionInstall = (registry: ExtensionRegistry, config: Readonly<Record<string, unknown>>) => void | Promise<void>;

/**
 * The property the host reads the declared contract version from: on the install function itself
 * (not on its module), so two installs in one module may target different versions.
 */
export const API_VERSION_MARKER = "deerflowApi";
/** The property carrying the extension's self-declared name, for diagnostics. */
export const EXTENSION_NAME_MARKER = "deerflowName";

export type DeclaredExtensionInstall = ExtensionInstall & { readonly deerflowApi: string; readonly deerflowName?: string };

/**
 * Stamps the contract version an install was written against (and optionally a name) on it, so a
 * host with an incompatible contract refuses it with a clear message instead of failing mid-install:
 *
 *     export const install = extension({ api: "0.1" })((registry, config) => { ... });
 */
export function extension(meta: { readonly api: string; readonly name?: string }): (install: ExtensionInstall) => DeclaredExtensionInstall {
  if (!isApiVersion(meta?.api)) {
    throw new ExtensionApiError(
      "invalid_api_version",
      `extension({ api }) needs a dotted numeric version such as "0.1", got ${JSON.stringify(meta?.api) ?? String(meta?.api)}`,
    );
  }
  return (install) => {
    if (typeof install !== "function") {
      throw new ExtensionApiError("invalid_install", "extension(...) wraps an install function: (registry, config) => void");
    }
    Object.defineProperty(install, API_VERSION_MARKER, { value: meta.api, enumerable: true, configurable: true });
    if (meta.name !== undefined) {
      Object.defineProperty(install, EXTENSION_NAME_MARKER, { value: meta.name, enumerable: true, configurable: true });
    }
    return install as DeclaredExtensionInstall;
  };
}
