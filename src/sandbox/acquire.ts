import { isGraphBubbleUp } from "@langchain/langgraph/web";
import { DeerflowError } from "../core/errors.ts";
import { runThreadId, runUserId } from "../engine/run-identity.ts";
import type { AgentRuntime } from "../engine/types.ts";
import { SandboxError, type Sandbox, type SandboxScope } from "../ports/sandbox.ts";

/*
 * How a run gets its sandbox: whose sandbox it is (the run's thread and user, engine/run-identity.ts),
 * whether the run may use one (the authorizer, asked once per tool call), and the acquisition every
 * sandbox user shares (the sandbox tools, the Sandbox, Uploads, ReadBeforeWrite and ToolOutputBudget
 * middlewares), which records the acquired id in the run scope.
 */

/**
 * Decides whether this run may use a sandbox at all (`sandbox:execute`). Receives the run's
 * read-only caller context (from which a principal is built) and the user and thread whose sandbox
 * would be acquired. Resolving false (or throwing) means no sandbox for this call.
 */
export type SandboxAuthorizer = (context: Readonly<Record<string, unknown>>, scope: SandboxScope) => Promise<boolean>;

/** The run may not use a sandbox: an authorization decision, not a sandbox failure. */
export class SandboxAuthorizationError extends DeerflowError {
  declare readonly code: "sandbox_not_authorized";

  constructor(scope: SandboxScope) {
    super(
      "sandbox_not_authorized",
      `Permission denied: user "${scope.userId}" may not use the sandbox of thread "${scope.threadId}" (sandbox:execute was denied). ` +
        "Answer without files and commands, or ask an administrator to grant sandbox access.",
    );
    this.name = "SandboxAuthorizationError";
  }
}

/**
 * Run-scope key of the sandbox this run acquired. Whoever acquires through {@link acquireRunSandbox}
 * records it, so the Sandbox middleware can bind the thread to it and release it even when the
 * acquiring call never reported the id itself.
 */
export const SANDBOX_ACQUIRED_SCOPE_KEY = "sandbox:acquired_id";
const AUTHORIZATION_SCOPE_PREFIX = "sandbox:authorization:";

/**
 * Run-context key under which a delegated subagent carries the sandbox of the run that delegated
 * to it. Run context is caller-mergeable, so the value is a token this module issued, not data: a
 * caller can put anything under the key, but only an issued token is ever believed.
 */
export const DELEGATED_SANDBOX_CONTEXT_KEY = "__deerflow_delegated_sandbox";

class DelegatedSandbox {
  constructor(readonly scope: SandboxScope) {}
}

const issuedDelegations = new WeakSet<DelegatedSandbox>();

/**
 * The run-context entry that makes a subagent a non-owner user of `scope`, the delegating run's
 * sandbox: its sandbox tools work on the lead thread's files, and it never releases that sandbox.
 */
export function bindDelegatedSandbox(scope: SandboxScope): Record<string, unknown> {
  const token = new DelegatedSandbox(Object.freeze({ userId: scope.userId, threadId: scope.threadId }));
  issuedDelegations.add(token);
  return { [DELEGATED_SANDBOX_CONTEXT_KEY]: token };
}

/** The delegating run's sandbox scope when this run is a delegated subagent, else undefined. */
export function delegatedSandboxScope(context: Readonly<Record<string, unknown>>): SandboxScope | undefined {
  const value = context[DELEGATED_SANDBOX_CONTEXT_KEY];
  return value instanceof DelegatedSandbox && issuedDelegations.has(value) ? value.scope : undefined;
}

/**
 * The user and thread whose sandbox this run uses: the delegating run's for a delegated subagent,
 * else the run's own; undefined when the run has no thread.
 */
export function sandboxScopeOf(runtime: AgentRuntime): SandboxScope | undefined {
  const delegated = delegatedSandboxScope(runtime.context);
  if (delegated) return delegated;
  const threadId = runThreadId(runtime);
  if (!threadId) return undefined;
  return { userId: runUserId(runtime), threadId };
}

/**
 * Hands a sandbox a delegated subagent acquired to the run that delegated to it, which owns it: the
 * delegating run then binds its thread to it and releases it (the release is what saves the files).
 */
export function adoptDelegatedSandbox(owner: AgentRuntime, subagentScope: Pick<AgentRuntime["scope"], "get">): void {
  const id = subagentScope.get<unknown>(SANDBOX_ACQUIRED_SCOPE_KEY);
  if (typeof id !== "string" || id.length === 0 || owner.scope.has(SANDBOX_ACQUIRED_SCOPE_KEY)) return;
  owner.scope.set(SANDBOX_ACQUIRED_SCOPE_KEY, id);
}

/** The id of the sandbox this run acquired through {@link acquireRunSandbox}, if any. */
export function acquiredSandboxId(runtime: AgentRuntime): string | undefined {
  const id = runtime.scope.get<unknown>(SANDBOX_ACQUIRED_SCOPE_KEY);
  return typeof id === "string" && id.length > 0 ? id : undefined;
}

/**
 * Asks the authorizer once. With a `decisionKey` (a tool call id) the decision is shared by every
 * acquisition under that key in this run, so a gate's inspection, the tool body and a post-read
 * hash of one call can never see different answers. An authorizer that throws denies.
 */
export function authorizeSandbox(
  runtime: AgentRuntime,
  scope: SandboxScope,
  authorizer: SandboxAuthorizer | undefined,
  decisionKey?: string,
): Promise<boolean> {
  if (!authorizer) return Promise.resolve(true);
  const key = decisionKey ? `${AUTHORIZATION_SCOPE_PREFIX}${decisionKey}` : undefined;
  const shared = key === undefined ? undefined : runtime.scope.get<Promise<boolean>>(key);
  if (shared) return shared;
  const decision = (async () => {
    try {
      return (await authorizer(runtime.context, scope)) === true;
    } catch (error) {
      if (isGraphBubbleUp(error)) throw error;
      if (runtime.signal?.aborted) throw error;
      return false;
    }
  })();
  if (key !== undefined) runtime.scope.set(key, decision);
  return decision;
}

/**
 * The run's sandbox, acquired through the one path every sandbox user shares: authorization first,
 * then the provider, then a record of the id in the run scope. Throws SandboxError when there is no
 * provider or thread, and SandboxAuthorizationError on a denial.
 */
export async function acquireRunSandbox(
  runtime: AgentRuntime,
  options: { authorizer?: SandboxAuthorizer | undefined; decisionKey?: string | undefined } = {},
): Promise<Sandbox> {
  const provider = runtime.services.sandbox;
  if (!provider) {
    throw new SandboxError("sandbox_unavailable", "Sandbox is not configured for this agent, so no files or commands are available.");
  }
  const scope = sandboxScopeOf(runtime);
  if (!scope) throw new SandboxError("sandbox_unavailable", "missing required thread id; run the agent on a thread.");
  if (!(await authorizeSandbox(runtime, scope, options.authorizer, options.decisionKey))) {
    throw new SandboxAuthorizationError(scope);
  }
  const sandbox = await provider.acquire(scope);
  if (!runtime.scope.has(SANDBOX_ACQUIRED_SCOPE_KEY)) runtime.scope.set(SANDBOX_ACQUIRED_SCOPE_KEY, sandbox.id);
  return sandbox;
}
