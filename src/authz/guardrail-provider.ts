/*
 * The pre-tool-call guardrail contract, aligned with the Open Agent Passport decision object: a
 * provider sees one tool call with its caller's identity and answers allow or deny with coded
 * reasons. Any object with `name` and `evaluate` works; the built-in one is an allow/deny list.
 */

/** One tool call as a guardrail provider sees it. */
export interface GuardrailRequest {
  readonly toolName: string;
  readonly toolInput: Readonly<Record<string, unknown>>;
  /** The configured passport (path or hosted agent id), if any. */
  readonly agentId: string | null;
  readonly threadId: string | null;
  readonly runId: string | null;
  readonly toolCallId: string | null;
  readonly isSubagent: boolean;
  /** ISO-8601 time of the check. */
  readonly timestamp: string;
  readonly userId: string | null;
  readonly userRole: string | null;
  readonly oauthProvider: string | null;
  readonly oauthId: string | null;
  readonly channelUserId: string | null;
  /** True only when the run context carries the boolean `true`. */
  readonly isInternal: boolean;
  /** A private copy of the run context's `authz_attributes`. */
  readonly authzAttributes: Readonly<Record<string, unknown>>;
}

/** A coded reason, e.g. `{ code: "oap.tool_not_allowed", message: "tool 'bash' not in allowlist" }`. */
export interface GuardrailReason {
  readonly code: string;
  readonly message?: string;
}

export interface GuardrailDecision {
  readonly allow: boolean;
  readonly reasons?: readonly GuardrailReason[];
  readonly policyId?: string | null;
  readonly metadata?: Readonly<Record<string, unknown>>;
}

export interface GuardrailProvider {
  readonly name: string;
  evaluate(request: GuardrailRequest): GuardrailDecision | Promise<GuardrailDecision>;
  /** The provider's policy identity, declared by the Guardrail middleware. */
  readonly policy?: { readonly id: string; readonly version?: string | null };
  /** Behaviour-affecting settings, JSON-safe. */
  releasePolicyParameters?(): Record<string, unknown>;
}

export function isGuardrailProvider(value: unknown): value is GuardrailProvider {
  if (typeof value !== "object" || value === null) return false;
  const candidate = value as Partial<GuardrailProvider>;
  return typeof candidate.name === "string" && typeof candidate.evaluate === "function";
}

export const ALLOWLIST_PROVIDER_NAME = "allowlist";
/** The `provider` values that name the allowlist (the second is upstream's class path, so its config.yaml ports verbatim). */
export const ALLOWLIST_PROVIDER_USES: readonly string[] = Object.freeze(["allowlist", "deerflow.guardrails.builtin:AllowlistProvider"]);

export interface AllowlistOptions {
  /** Only these tools may run; `null`/absent allows every tool, and `[]` allows none. */
  readonly allowed_tools?: readonly string[] | null;
  /** These tools never run, even when allowed. */
  readonly denied_tools?: readonly string[] | null;
}

/** Allow and deny lists of tool names; no external dependency. */
export class AllowlistProvider implements GuardrailProvider {
  readonly name = ALLOWLIST_PROVIDER_NAME;
  // null and [] differ on purpose: no allowlist allows everything, an empty one allows nothing.
  readonly #allowed: ReadonlySet<string> | null;
  readonly #denied: ReadonlySet<string>;

  constructor(options: AllowlistOptions = {}) {
    this.#allowed = options.allowed_tools === undefined || options.allowed_tools === null ? null : new Set(options.allowed_tools);
    this.#denied = new Set(options.denied_tools ?? []);
  }

  evaluate(request: GuardrailRequest): GuardrailDecision {
    if (this.#allowed !== null && !this.#allowed.has(request.toolName)) {
      return { allow: false, reasons: [{ code: "oap.tool_not_allowed", message: `tool '${request.toolName}' not in allowlist` }] };
    }
    if (this.#denied.has(request.toolName)) {
      return { allow: false, reasons: [{ code: "oap.tool_not_allowed", message: `tool '${request.toolName}' is denied` }] };
    }
    return { allow: true, reasons: [{ code: "oap.allowed" }] };
  }

  releasePolicyParameters(): Record<string, unknown> {
    return {
      allowed_tools: this.#allowed === null ? null : [...this.#allowed].sort(),
      denied_tools: [...this.#denied].sort(),
    };
  }
}
