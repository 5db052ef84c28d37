import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { assembleLeadAgent, type LeadAgentAssembly } from "../agents/lead-agent.ts";
import type { LeadConfig } from "../agents/app-config.ts";
import type { AuthorizationProvider } from "../authz/index.ts";
import { availableModelNames } from "../config/index.ts";
import type { Agent } from "../engine/agent.ts";
import type { AgentServices } from "../engine/services.ts";
import type { AgentMiddleware, AgentTool } from "../engine/types.ts";
import { canonicalHash } from "../extension-api/index.ts";
import type { DetachedObservations } from "../extensions/detached.ts";
import type { ExtensionDiagnostic } from "../extensions/diagnostics.ts";
import type { LoadedExtensions } from "../extensions/registry.ts";
import type { MemoryStore } from "../middlewares/memory/index.ts";
import type { Env } from "../ports/runtime-ports.ts";
import type { CustomAgent } from "../agents/custom-agent.ts";
import { deploymentSkillRegistry } from "../skills/states.ts";
import { customAgentSetup, unknownCustomAgent, type CustomAgentStore } from "./custom-agents.ts";
import type { RunAgentRequest, RunPrincipal } from "./runs/types.ts";

/*
 * One lead agent per distinct caller, built once and reused. What a principal may do decides the
 * tool set (Layer-1 authorization filters tools at assembly), so the cache key is a canonical hash
 * of the WHOLE principal as it is at call time, deep-copied before anything else reads it: a
 * caller that mutates its user object afterwards gets a new key and a new agent, never a cached
 * agent built for who it used to be.
 */

export interface LeadAgentFactoryOptions {
  readonly config: LeadConfig;
  readonly services: AgentServices;
  readonly env: Env;
  readonly checkpointer: BaseCheckpointSaver;
  readonly extensions?: LoadedExtensions;
  /** One store for every agent of the process; created by the first assembly (and closed by close()) otherwise. */
  readonly memoryStore?: MemoryStore;
  readonly extraTools?: readonly AgentTool[];
  /**
   * Tools that can change between runs (the MCP servers of extensions_config.json as it is now),
   * asked before every run; a new `revision` builds a new agent, added after `extraTools`.
   */
  readonly liveTools?: () => Promise<{ readonly revision: string; readonly tools: readonly AgentTool[] }>;
  readonly configuredMiddlewares?: readonly AgentMiddleware[];
  readonly authorizationProvider?: AuthorizationProvider;
  readonly onDiagnostic?: (diagnostic: ExtensionDiagnostic) => void;
  /** The host's background observations (stopped at shutdown before close() flushes the memory store). */
  readonly detachedObservations?: DetachedObservations;
  /** Where `context.agent_name` is looked up; without one a run naming an agent is refused. */
  readonly customAgents?: CustomAgentStore;
  /** Distinct callers kept; the least recently used is dropped beyond it. Default 64. */
  readonly maxAgents?: number;
}

/** What an embedder may add to every lead agent (the gateway's and the client's options carry the same four). */
export type LeadAgentExtras = Pick<LeadAgentFactoryOptions, "extensions" | "extraTools" | "configuredMiddlewares" | "authorizationProvider">;

/** The extras that were given, and only those: an absent one is left out, never passed as undefined. */
export function leadAgentExtras(source: LeadAgentExtras): LeadAgentExtras {
  return {
    ...(source.extensions ? { extensions: source.extensions } : {}),
    ...(source.extraTools ? { extraTools: source.extraTools } : {}),
    ...(source.configuredMiddlewares ? { configuredMiddlewares: source.configuredMiddlewares } : {}),
    ...(source.authorizationProvider ? { authorizationProvider: source.authorizationProvider } : {}),
  };
}

export interface LeadAgentFactory {
  (request: RunAgentRequest): Promise<Agent>;
  /** Agents currently cached. */
  readonly size: number;
  /** Model names a run may ask for. */
  modelNames(): readonly string[];
  /** Flushes and closes the memory store this factory created. */
  close(): Promise<void>;
}

export function createLeadAgentFactory(options: LeadAgentFactoryOptions): LeadAgentFactory {
  const maxAgents = Math.max(1, options.maxAgents ?? 64);
  const cache = new Map<string, Promise<LeadAgentAssembly>>();
  let memoryStore = options.memoryStore;
  let ownsMemoryStore = false;
  // The first assembly creates the process's memory store; the others wait for it and share it.
  let first: Promise<unknown> | undefined;
  const storage = options.services.storage;
  const skills = storage
    ? deploymentSkillRegistry({ storage, ...(options.services.versioned ? { versioned: options.services.versioned } : {}), config: options.config.skills ?? {} })
    : undefined;

  const build = async (
    principal: PrincipalSnapshot,
    request: RunAgentRequest,
    customAgent: CustomAgent | undefined,
    liveTools: readonly AgentTool[],
  ): Promise<LeadAgentAssembly> => {
    if (first) await first.catch(() => undefined);
    const assembly = assembleLeadAgent({
      config: options.config,
      services: options.services,
      env: options.env,
      checkpointer: options.checkpointer,
      ...(request.modelName === undefined ? {} : { model: request.modelName }),
      planMode: request.planMode === true,
      subagentsEnabled: request.subagentsEnabled === true,
      context: principalContext(principal),
      ...(customAgent ? { customAgent } : {}),
      // The bootstrap chat writes the agent it creates through the store /api/agents uses.
      ...(request.bootstrap === true && options.customAgents
        ? { agentSetup: customAgentSetup(options.customAgents, { systemRole: String(principal.systemRole), isInternal: principal.isInternal === true }) }
        : {}),
      ...(memoryStore ? { memoryStore } : {}),
      // The registry whose load keyed this build: the agent lists the same skills the key names.
      ...(skills ? { skillRegistry: skills } : {}),
      ...leadAgentExtras(options),
      ...(liveTools.length > 0 ? { extraTools: [...(options.extraTools ?? []), ...liveTools] } : {}),
      ...(options.onDiagnostic ? { onExtensionDiagnostic: options.onDiagnostic } : {}),
      ...(options.detachedObservations ? { detachedObservations: options.detachedObservations } : {}),
    });
    first ??= assembly;
    const built = await assembly;
    if (!memoryStore && built.memoryStore) {
      memoryStore = built.memoryStore;
      ownsMemoryStore = true;
    }
    return built;
  };

  const factory = async (request: RunAgentRequest): Promise<Agent> => {
    const principal = snapshotPrincipal(request.user);
    // Read on every run, and part of the key: an agent updated since the last run gets a new build.
    const customAgent = request.agentName === undefined ? undefined : await loadCustomAgent(options.customAgents, request.agentName);
    // The enabled skills are in the system prompt: a skill installed, changed or switched off since
    // the last run gets that run a new build.
    const enabledSkills = skills ? (await skills.load()).skills.filter((skill) => skill.enabled).map((skill) => `${skill.name}@${skill.sha256}`) : [];
    const live = options.liveTools ? await options.liveTools() : undefined;
    const key = await canonicalHash({
      live_tools: live?.revision ?? null,
      principal,
      skills: enabledSkills,
      model: request.modelName ?? null,
      subagents: request.subagentsEnabled === true,
      plan_mode: request.planMode === true,
      custom_agent: customAgent ?? null,
      bootstrap: request.bootstrap === true,
    });
    let entry = cache.get(key);
    if (entry) {
      cache.delete(key);
      cache.set(key, entry);
    } else {
      entry = build(principal, request, customAgent, live?.tools ?? []);
      cache.set(key, entry);
      // A failed build is not cached: the next run retries it.
      entry.catch(() => {
        if (cache.get(key) === entry) cache.delete(key);
      });
      while (cache.size > maxAgents) cache.delete(cache.keys().next().value!);
    }
    return (await entry).agent;
  };

  Object.defineProperty(factory, "size", { get: () => cache.size });
  return Object.assign(factory, {
    modelNames: () => availableModelNames(options.config),
    async close() {
      cache.clear();
      if (ownsMemoryStore) await memoryStore?.close().catch(() => false);
    },
  }) as unknown as LeadAgentFactory;
}

/** The agent a run named; a name that names none is refused before anything is built. */
async function loadCustomAgent(store: CustomAgentStore | undefined, name: string): Promise<CustomAgent> {
  const agent = await store?.get(name);
  if (!agent) throw unknownCustomAgent(name);
  return agent;
}

type PrincipalSnapshot = Record<string, unknown>;

/**
 * A plain, deep copy of the caller as it is now: every field the principal carries, Sets as sorted
 * arrays and Maps as objects, so the hash sees what the agent is built from and nothing the
 * caller can still change.
 */
export function snapshotPrincipal(user: RunPrincipal): PrincipalSnapshot {
  return plainCopy(user) as PrincipalSnapshot;
}

function plainCopy(value: unknown): unknown {
  if (value === null || typeof value !== "object") {
    if (typeof value === "function" || typeof value === "symbol" || value === undefined) return undefined;
    if (typeof value === "bigint") return value.toString();
    if (typeof value === "number" && !Number.isFinite(value)) return null;
    return value;
  }
  if (Array.isArray(value)) return value.map((item) => plainCopy(item) ?? null);
  if (value instanceof Set) return [...value].map((item) => plainCopy(item) ?? null).sort(compareJson);
  if (value instanceof Map) return plainCopy(Object.fromEntries(value));
  if (value instanceof Date) return value.toISOString();
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    const copy = plainCopy(item);
    if (copy !== undefined) out[key] = copy;
  }
  return out;
}

function compareJson(a: unknown, b: unknown): number {
  const x = JSON.stringify(a);
  const y = JSON.stringify(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

/** The identity keys assembly-time authorization reads, from the snapshot (never from the live object). */
function principalContext(principal: PrincipalSnapshot): Record<string, unknown> {
  const role = principal.systemRole;
  return {
    user_id: principal.id,
    ...(typeof role === "string" && role !== "internal" ? { user_role: role } : {}),
    is_internal: principal.isInternal === true,
    ...(principal.authzAttributes && typeof principal.authzAttributes === "object" ? { authz_attributes: principal.authzAttributes } : {}),
    ...(typeof principal.oauthProvider === "string" ? { oauth_provider: principal.oauthProvider } : {}),
    ...(typeof principal.oauthId === "string" ? { oauth_id: principal.oauthId } : {}),
  };
}
