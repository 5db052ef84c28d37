import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import type { LeadConfig } from "../agents/app-config.ts";
import type { DetachedObservations } from "../extensions/detached.ts";
import type { ExtensionDiagnostic } from "../extensions/diagnostics.ts";
import type { LoadedExtensions } from "../extensions/registry.ts";
import type { KeyValue } from "../ports/key-value.ts";
import type { VersionedKeyValue } from "../ports/versioned-key-value.ts";
import type { Clock, Env } from "../ports/runtime-ports.ts";
import type { SandboxProvider } from "../ports/sandbox.ts";
import type { CustomAgentStore } from "../runtime/custom-agents.ts";
import type { RunManager } from "../runtime/runs/manager.ts";
import type { GatewayLogger } from "./errors.ts";
import type { AgentFactory, GatewayUser, RouteGuard, ThreadRecord, ThreadStore } from "./types.ts";

// What createGateway (app.ts) hands the parts other modules contribute (routes/runs.ts, files,
// services), and what they hand back: declared here so the parts need not import app.ts.

/** Problems found while starting (a service that failed, a router refused), attributed to their source. */
export type GatewayDiagnostic = ExtensionDiagnostic;

/** What the gateway built, handed to the parts other modules contribute (runs, files, services). */
export interface GatewayDeps {
  readonly config: LeadConfig;
  readonly storage: KeyValue;
  /** Compare-and-set over `storage`'s keys (the records several writers share: memory, threads ...). */
  readonly versioned: VersionedKeyValue;
  readonly env: Env;
  readonly clock: Clock;
  readonly logger: GatewayLogger;
  readonly checkpointer: BaseCheckpointSaver;
  readonly threads: ThreadStore;
  readonly guard: RouteGuard;
  readonly agentFactory: AgentFactory;
  /** The deployment's custom agents (/api/agents), which runs pick with `context.agent_name`. */
  readonly customAgents: CustomAgentStore;
  readonly sandbox: SandboxProvider;
  readonly extensions: LoadedExtensions;
  readonly reportDiagnostic: (diagnostic: GatewayDiagnostic) => void;
  /** Background extension observations; shutdown stops accepting them before the memory flush. */
  readonly detachedObservations?: DetachedObservations;
}

/** What the run routes tell the rest of the gateway (returned by `registerExtraRoutes`). */
export interface GatewayRunHooks {
  /** The runs part's RunManager, so an in-process client (DeerFlowClient.fromGateway) shares its runs. */
  readonly runs?: RunManager<GatewayUser>;
  /** True while a run holds the thread (thread delete and state writes wait for it). */
  hasActiveRun?(threadId: string): boolean | Promise<boolean>;
  /** Holds a thread for its deletion: 409 while a run holds it, and no run starts until released. */
  reserveThread?(threadId: string): Promise<() => void>;
  /** Interrupts and persists in-flight runs; called first at shutdown, bounded by `drainTimeoutMs`. */
  drain?(timeoutMs: number): Promise<void>;
  /** Removes what else a deleted thread owned (uploads, outputs). */
  onThreadDeleted?(thread: ThreadRecord): Promise<void>;
  /** Releases what the runs part holds (stream bridge, journal); after services stopped. */
  close?(): Promise<void>;
  /**
   * A request let go of a large body (an upload): memory is reclaimed once no run is active and
   * things went quiet, as after a burst of runs (RunManager.memoryReleased).
   */
  memoryReleased?(): void;
}
