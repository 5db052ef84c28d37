import { ToolMessage } from "@langchain/core/messages";
import { Command, isCommand } from "@langchain/langgraph/web";
import * as v from "valibot";
import type { Assert, SameType } from "../core/types.ts";
import type { AgentMiddleware, AgentRuntime, AgentState, HookResult, ToolCallRequest, ToolHandler, ToolResult } from "../engine/types.ts";
import {
  SANDBOX_ACQUIRED_SCOPE_KEY,
  acquireRunSandbox,
  acquiredSandboxId,
  authorizeSandbox,
  delegatedSandboxScope,
  sandboxScopeOf,
  type SandboxAuthorizer,
} from "../sandbox/acquire.ts";
import { parseMiddlewareConfig } from "../engine/middleware-config.ts";

/*
 * Sandbox: binds a thread to its sandbox and gives the sandbox back when the run ends. Acquisition
 * is lazy by default (the first sandbox tool acquires it); this middleware then writes the id into
 * state, because the tool call that acquired it may not have said so itself. Release runs on every
 * exit path, and the virtual provider persists the thread's files on release.
 */

export const SANDBOX_NAME = "Sandbox";

export const SandboxConfigSchema = v.strictObject({
  /**
   * true: the first sandbox tool call acquires the sandbox (a run that never touches files pays
   * nothing). false: acquire in beforeAgent, so the sandbox is ready before the model's first call.
   */
  lazy_init: v.optional(v.boolean()),
});
export interface SandboxConfig {
  lazy_init?: boolean;
}
type _SandboxConfigMatches = Assert<SameType<SandboxConfig, v.InferOutput<typeof SandboxConfigSchema>>>;
export const SANDBOX_DEFAULTS: Readonly<Required<SandboxConfig>> = Object.freeze({ lazy_init: true });

export interface SandboxMiddlewareDeps {
  /** `sandbox:execute` gate: on a denial the eager path skips acquisition and the tools' own gate answers. */
  readonly authorizer?: SandboxAuthorizer;
  /**
   * Release in afterAgent (default true). A delegated subagent never releases whatever this says:
   * it uses the delegating run's sandbox (see bindDelegatedSandbox), and that run owns the release.
   */
  readonly releaseOnExit?: boolean;
}

export { SANDBOX_ACQUIRED_SCOPE_KEY, type SandboxAuthorizer };

function stateSandboxId(state: AgentState | undefined): string | undefined {
  const id = state?.sandbox?.sandbox_id;
  return typeof id === "string" && id.length > 0 ? id : undefined;
}

/**
 * `result` with the sandbox binding added: a ToolMessage becomes a Command carrying it, an
 * object-form update gains the key (everything else on the Command kept). A tuple-form update is
 * left alone, since rewriting a shape we do not own could silently drop writes.
 */
export function attachSandboxUpdate(result: ToolResult, sandboxId: string): ToolResult {
  const binding = { sandbox: { sandbox_id: sandboxId } };
  if (ToolMessage.isInstance(result)) return new Command({ update: { ...binding, messages: [result] } });
  if (!isCommand(result)) return result;
  const command = result as Command;
  const update: unknown = command.update;
  if (typeof update !== "object" || update === null || Array.isArray(update)) return result;
  return new Command({
    update: { ...(update as Record<string, unknown>), ...binding },
    ...(command.goto === undefined ? {} : { goto: command.goto }),
    ...(command.graph === undefined ? {} : { graph: command.graph }),
    ...(command.resume === undefined ? {} : { resume: command.resume }),
  });
}

/**
 * The Sandbox middleware (lead chain position 6). beforeAgent acquires eagerly only when
 * `lazy_init` is false and authorization allows; wrapToolCall stores what a tool call wrote (see
 * Sandbox.flush) and records a sandbox it acquired; afterAgent releases the thread's sandbox and any sandbox this run acquired.
 */
export function createSandboxMiddleware(config?: Partial<SandboxConfig>, deps: SandboxMiddlewareDeps = {}): AgentMiddleware {
  const parsed = parseMiddlewareConfig(SandboxConfigSchema, config, SANDBOX_NAME, "Fix this key (lazy_init takes true or false).");
  const lazyInit = parsed.lazy_init ?? SANDBOX_DEFAULTS.lazy_init;
  const authorizer = deps.authorizer;
  const releaseOnExit = deps.releaseOnExit ?? true;

  return {
    name: SANDBOX_NAME,

    async beforeAgent(state: AgentState, runtime: AgentRuntime): Promise<HookResult> {
      if (lazyInit || stateSandboxId(state) !== undefined || !runtime.services.sandbox) return undefined;
      const scope = sandboxScopeOf(runtime);
      if (!scope) return undefined;
      // A denial is not an error here: the run proceeds without a sandbox and each sandbox tool
      // answers with its own permission error if the model reaches for one.
      if (!(await authorizeSandbox(runtime, scope, authorizer))) return undefined;
      const sandbox = await acquireRunSandbox(runtime);
      return { sandbox: { sandbox_id: sandbox.id } };
    },

    async wrapToolCall(request: ToolCallRequest, handler: ToolHandler): Promise<ToolResult> {
      const bound = stateSandboxId(request.state);
      const result = await handler(request);
      const acquired = acquiredSandboxId(request.runtime);
      // Whatever the tool wrote is stored before its result is: the result is what the checkpoint
      // keeps, and a crash after it must not lose the files it reports.
      const provider = request.runtime.services.sandbox;
      for (const id of new Set([bound, acquired])) if (id !== undefined) await provider?.get(id)?.flush?.();
      if (bound !== undefined) return result;
      if (acquired === undefined) return result;
      // Only a sandbox the provider still holds is worth binding the thread to.
      if (!provider?.get(acquired)) return result;
      return attachSandboxUpdate(result, acquired);
    },

    async afterAgent(state: AgentState, runtime: AgentRuntime): Promise<HookResult> {
      const provider = runtime.services.sandbox;
      // A non-owner: finishing must not pull the sandbox from under the run that delegated to it.
      if (!provider || !releaseOnExit || delegatedSandboxScope(runtime.context)) return undefined;
      // Both: a thread bound in an earlier run may have been handed a fresh sandbox in this one.
      const ids = new Set([stateSandboxId(state), acquiredSandboxId(runtime)].filter((id): id is string => id !== undefined));
      let failure: unknown;
      for (const id of ids) {
        try {
          await provider.release(id);
        } catch (error) {
          // Cleanup: one failed release (or an abort) must not keep the others from running; the
          // first failure is still raised, untouched, once every release was attempted.
          failure ??= error;
        }
      }
      if (failure !== undefined) throw failure;
      return undefined;
    },

    releasePolicyParameters() {
      return { lazy_init: lazyInit, authorization_gate: authorizer !== undefined, release_on_exit: releaseOnExit };
    },
  };
}
