import { AIMessage } from "@langchain/core/messages";
import { isGraphBubbleUp } from "@langchain/langgraph/web";
import * as v from "valibot";
import type { Assert, SameType } from "../../core/types.ts";
import type { AgentMiddleware, AgentRuntime, ModelHandler, ModelRequest } from "../../engine/types.ts";
import { parseMiddlewareConfig } from "../../engine/middleware-config.ts";
import { emitEvent } from "../../engine/events.ts";
import {
  CIRCUIT_OPEN_MESSAGE,
  RETRIABLE_STATUS_CODES,
  RETRY_BUDGET_BY_ERROR_NAME,
  RETRY_BUDGET_BY_REASON,
  classifyLlmError,
  errorDetail,
  errorTypeName,
  maxAttemptsFor,
  retryAfterMsOf,
  retryMessage,
  userMessageFor,
  type LlmErrorReason,
} from "./classify.ts";
import { sharedLlmCallLimiter, type LlmCallLimiter } from "./limiter.ts";

/*
 * Provider failures become something the run can carry on with: transient ones are retried with
 * jittered backoff (or exactly as long as the provider asked), and whatever still fails comes back
 * as an assistant message marked `deerflow_error_fallback`, and the run is marked failed through
 * its scope (RunScope.fail), which the run worker reports as an errored run with a readable reason. A circuit breaker stops hammering a provider that keeps
 * failing. Interrupts and cancellations are control flow and pass straight through.
 */

export const LLM_ERROR_HANDLING_NAME = "LLMErrorHandling";
export const LLM_RETRY_EVENT_TYPE = "llm_retry";
/** The marker on an assistant message that stands in for an answer the model could not give. */
export const ERROR_FALLBACK_KEY = "deerflow_error_fallback";
/** The error name a run ends with when its model could not answer. */
export const LLM_RUN_FAILURE_NAME = "LLMError";
const DEFAULT_RUN_FAILURE_DETAIL = "The model provider failed after retries.";

/** Marks the run failed because its model could not answer; `detail` (default: a generic one) is the run's error message. */
export function failRunOnModelError(runtime: Pick<AgentRuntime, "scope">, detail?: string): void {
  runtime.scope.fail({ name: LLM_RUN_FAILURE_NAME, message: detail ?? DEFAULT_RUN_FAILURE_DETAIL });
}

const int = (min: number) => v.pipe(v.number(), v.integer(), v.minValue(min));

export const LLMErrorHandlingConfigSchema = v.strictObject({
  circuit_breaker: v.optional(
    v.strictObject({
      failure_threshold: v.optional(int(1)),
      recovery_timeout_sec: v.optional(int(0)),
    }),
  ),
  llm_call: v.optional(
    v.strictObject({
      retry_max_attempts: v.optional(int(1)),
      retry_base_delay_ms: v.optional(int(0)),
      retry_cap_delay_ms: v.optional(int(0)),
      burst_retry_base_delay_ms: v.optional(int(0)),
      max_concurrent_calls: v.optional(int(0)),
    }),
  ),
});
export interface LLMErrorHandlingConfigInput {
  circuit_breaker?: { failure_threshold?: number; recovery_timeout_sec?: number };
  llm_call?: { retry_max_attempts?: number; retry_base_delay_ms?: number; retry_cap_delay_ms?: number; burst_retry_base_delay_ms?: number; max_concurrent_calls?: number };
}
type _LLMErrorHandlingConfigInputMatches = Assert<SameType<LLMErrorHandlingConfigInput, v.InferInput<typeof LLMErrorHandlingConfigSchema>>>;

export interface LLMErrorHandlingConfig {
  readonly circuit_breaker: { readonly failure_threshold: number; readonly recovery_timeout_sec: number };
  readonly llm_call: {
    readonly retry_max_attempts: number;
    readonly retry_base_delay_ms: number;
    readonly retry_cap_delay_ms: number;
    readonly burst_retry_base_delay_ms: number;
    readonly max_concurrent_calls: number;
  };
}

export const LLM_ERROR_HANDLING_DEFAULTS: LLMErrorHandlingConfig = Object.freeze({
  circuit_breaker: Object.freeze({ failure_threshold: 5, recovery_timeout_sec: 60 }),
  llm_call: Object.freeze({
    retry_max_attempts: 3,
    retry_base_delay_ms: 1000,
    retry_cap_delay_ms: 8000,
    burst_retry_base_delay_ms: 5000,
    max_concurrent_calls: 0,
  }),
});

export interface LLMErrorHandlingDeps {
  /** Uniform in [0, 1); jitter draws from it (default Math.random). */
  readonly random?: () => number;
  /**
   * The in-flight cap to use instead of the one shared by every middleware built from the same
   * `llm_call` config object (see sharedLlmCallLimiter).
   */
  readonly limiter?: LlmCallLimiter;
}

export interface LlmErrorFallbackFields {
  readonly errorType: string;
  readonly reason: LlmErrorReason | "circuit_open";
  readonly detail: string;
}

/** The assistant message a failed call becomes; the run worker ends the run as an error on the marker. */
export function buildLlmErrorFallback(content: string, fields: LlmErrorFallbackFields): AIMessage {
  return new AIMessage({
    content,
    additional_kwargs: {
      [ERROR_FALLBACK_KEY]: true,
      error_type: fields.errorType,
      error_reason: fields.reason,
      error_detail: fields.detail,
    },
  });
}

type CircuitState = "closed" | "open" | "half_open";

/**
 * Per instance on purpose (as upstream): one agent's provider outage must not fast-fail another
 * agent that talks to a different provider. Times are the runtime clock's, so tests drive them.
 */
class CircuitBreaker {
  #state: CircuitState = "closed";
  #failures = 0;
  #openUntil = 0;
  #probeInFlight = false;
  readonly #threshold: number;
  readonly #recoveryMs: number;

  constructor(threshold: number, recoveryMs: number) {
    this.#threshold = threshold;
    this.#recoveryMs = recoveryMs;
  }

  /** True when the call must fail fast; in half-open state admits exactly one probe. */
  rejects(now: number): boolean {
    if (this.#state === "open") {
      if (now < this.#openUntil) return true;
      this.#state = "half_open";
      this.#probeInFlight = false;
    }
    if (this.#state === "half_open") {
      if (this.#probeInFlight) return true;
      this.#probeInFlight = true;
    }
    return false;
  }

  recordSuccess(): void {
    this.#state = "closed";
    this.#failures = 0;
    this.#openUntil = 0;
    this.#probeInFlight = false;
  }

  recordFailure(now: number): void {
    if (this.#state === "half_open") {
      this.#state = "open";
      this.#openUntil = now + this.#recoveryMs;
      this.#probeInFlight = false;
      return;
    }
    this.#failures += 1;
    if (this.#failures >= this.#threshold) {
      this.#openUntil = now + this.#recoveryMs;
      if (this.#state !== "open") {
        this.#state = "open";
        this.#probeInFlight = false;
      }
    }
  }

  /** Frees the half-open probe without a verdict (an interrupt, an abort, a non-retriable error). */
  releaseProbe(): void {
    if (this.#state === "half_open") this.#probeInFlight = false;
  }
}

/**
 * Retries transient model failures, turns every final failure into an error-fallback AIMessage,
 * and fast-fails through a circuit breaker while the provider keeps failing.
 */
export function createLLMErrorHandlingMiddleware(config?: LLMErrorHandlingConfigInput, deps: LLMErrorHandlingDeps = {}): AgentMiddleware {
  const parsed = parseMiddlewareConfig(LLMErrorHandlingConfigSchema, config, LLM_ERROR_HANDLING_NAME);
  const resolved: LLMErrorHandlingConfig = {
    circuit_breaker: { ...LLM_ERROR_HANDLING_DEFAULTS.circuit_breaker, ...parsed.circuit_breaker },
    llm_call: { ...LLM_ERROR_HANDLING_DEFAULTS.llm_call, ...parsed.llm_call },
  };
  const { circuit_breaker: cb, llm_call: call } = resolved;
  const random = deps.random ?? Math.random;
  // Keyed by the caller's own section object: the parsed copy is new on every call.
  const limiter = deps.limiter ?? sharedLlmCallLimiter(config?.llm_call ?? undefined, call.max_concurrent_calls);
  const breaker = new CircuitBreaker(cb.failure_threshold, cb.recovery_timeout_sec * 1000);

  function retryDelayMs(previous: number | undefined, error: unknown, reason: LlmErrorReason, now: number): number {
    const asked = retryAfterMsOf(error, now);
    if (asked !== undefined) return asked;
    const base = reason === "burst_rate" ? call.burst_retry_base_delay_ms : call.retry_base_delay_ms;
    const cap = call.retry_cap_delay_ms;
    const seed = previous ?? base;
    // Decorrelated jitter, clamped before the draw so delays spread evenly up to the cap instead of
    // piling onto it: a fleet that failed together must not come back on the same tick.
    const high = Math.min(cap, Math.max(base, seed * 3));
    if (high < base) return cap;
    return base + Math.floor(random() * (high - base + 1));
  }

  async function attempt(request: ModelRequest, handler: ModelHandler): Promise<AIMessage> {
    return limiter ? limiter.run(() => handler(request), request.runtime.signal) : handler(request);
  }

  return {
    name: LLM_ERROR_HANDLING_NAME,
    async wrapModelCall(request: ModelRequest, handler: ModelHandler): Promise<AIMessage> {
      const { runtime } = request;
      const clock = runtime.services.clock;
      if (breaker.rejects(clock.now())) {
        failRunOnModelError(runtime, "LLM circuit breaker is open");
        return buildLlmErrorFallback(CIRCUIT_OPEN_MESSAGE, {
          errorType: "CircuitBreakerOpen",
          reason: "circuit_open",
          detail: "LLM circuit breaker is open",
        });
      }

      let attemptNo = 1;
      let previousDelay: number | undefined;
      for (;;) {
        let failure: unknown;
        try {
          const response = await attempt(request, handler);
          breaker.recordSuccess();
          runtime.scope.clearFailure();
          return response;
        } catch (error) {
          if (isGraphBubbleUp(error) || runtime.signal?.aborted) {
            breaker.releaseProbe();
            throw error;
          }
          failure = error;
        }

        const { retriable, reason } = classifyLlmError(failure);
        const maxAttempts = maxAttemptsFor(failure, reason, call.retry_max_attempts);
        if (retriable && attemptNo < maxAttempts) {
          const waitMs = retryDelayMs(previousDelay, failure, reason, clock.now());
          previousDelay = waitMs;
          try {
            emitEvent(runtime, {
              type: LLM_RETRY_EVENT_TYPE,
              attempt: attemptNo,
              max_attempts: maxAttempts,
              wait_ms: waitMs,
              reason,
              message: retryMessage(attemptNo, maxAttempts, waitMs, reason),
            });
            await clock.sleep(waitMs, runtime.signal);
          } catch (error) {
            breaker.releaseProbe();
            throw error;
          }
          attemptNo += 1;
          continue;
        }

        // A burst-rate throttle is the provider shaping load, not the provider being down: letting
        // it trip the breaker would fast-fail every call for the whole recovery window.
        if (retriable && reason !== "burst_rate") breaker.recordFailure(clock.now());
        else breaker.releaseProbe();
        const detail = errorDetail(failure);
        failRunOnModelError(runtime, detail);
        return buildLlmErrorFallback(userMessageFor(failure, reason), {
          errorType: errorTypeName(failure),
          reason,
          detail,
        });
      }
    },
    releasePolicyParameters() {
      return {
        circuit_breaker: { ...cb },
        llm_call: { ...call },
        retriable_status_codes: [...RETRIABLE_STATUS_CODES],
        retry_budget_by_error_name: { ...RETRY_BUDGET_BY_ERROR_NAME },
        retry_budget_by_reason: { ...RETRY_BUDGET_BY_REASON },
        backoff: "decorrelated_jitter",
        retry_after: "honoured_verbatim",
      };
    },
  };
}
