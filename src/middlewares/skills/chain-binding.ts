import { DeerflowError } from "../../core/errors.ts";
import { bytesToHex, hexToBytes } from "../../core/hex.ts";
import type { AgentRuntime } from "../../engine/types.ts";
import { CanonicalJsonError, canonicalJson } from "../../extension-api/canonical.ts";
import { isOneOf } from "../../extension-api/one-of.ts";
import { isRecord } from "../../core/guards.ts";

/*
 * SkillActivation publishes the slash-activated skill and SkillToolPolicy publishes its per-step
 * decision in the run scope. Every middleware of the stack can write that scope, so a value there
 * is only trusted when it carries an HMAC made with a key that exists nowhere but inside one
 * assembled SkillActivation/SkillToolPolicy pair. The key is drawn fresh for every pair and
 * imported as non-extractable, so neither a scope snapshot nor a heap walk of plain data can
 * reveal it, and a record copied from another run fails because the run id is signed with it.
 */

export const SLASH_SOURCE_VERSION = 1;
export const POLICY_DECISION_VERSION = 2;

export type PolicySource = "passive" | "slash" | "skill_context";
export const POLICY_SOURCES: readonly PolicySource[] = Object.freeze(["passive", "slash", "skill_context"]);

/** What SkillToolPolicy decided for one model step; tool calls of that step reuse it. */
export interface PolicyDecision {
  readonly source: PolicySource;
  readonly activePaths: readonly string[];
  /** null: the active skills do not restrict tools. */
  readonly allowedNames: readonly string[] | null;
}

/** The JSON-safe record as it sits in the run scope. */
export interface StoredPolicyDecision {
  version: number;
  run_id: string;
  source: PolicySource;
  active_paths: string[];
  allowed_names: string[] | null;
  mac: string;
}

export interface StoredSlashSource {
  version: number;
  run_id: string;
  path: string;
  mac: string;
}

const HEX_MAC = /^[0-9a-f]{64}$/;

/** The secret shared by one SkillActivation/SkillToolPolicy pair. Create it with {@link SkillChainBinding.create}. */
export class SkillChainBinding {
  /** Random, not secret: it only keeps two pairs (lead and subagent chains) from sharing scope keys. */
  readonly id: string;
  readonly #key: Promise<CryptoKey>;

  private constructor(id: string, key: Promise<CryptoKey>) {
    this.id = id;
    this.#key = key;
  }

  static create(): SkillChainBinding {
    const secret = crypto.getRandomValues(new Uint8Array(32));
    const key = crypto.subtle
      .importKey("raw", secret, { name: "HMAC", hash: "SHA-256" }, false, ["sign", "verify"])
      .finally(() => secret.fill(0));
    const id = bytesToHex(crypto.getRandomValues(new Uint8Array(8)));
    return new SkillChainBinding(id, key);
  }

  get slashSourceKey(): string {
    return `skill_chain:${this.id}:slash_source`;
  }

  get decisionKey(): string {
    return `skill_chain:${this.id}:tool_policy_decision`;
  }

  /** Records the skill the user slash-activated in this run (its container path only, never its content). */
  async publishSlashSource(runtime: AgentRuntime, path: string): Promise<void> {
    const fields = { version: SLASH_SOURCE_VERSION, run_id: runtime.runId, path };
    const mac = await this.#sign("slash_source", fields);
    if (mac === undefined) runtime.scope.delete(this.slashSourceKey);
    else runtime.scope.set(this.slashSourceKey, { ...fields, mac } satisfies StoredSlashSource);
  }

  /** The authenticated slash-activated path of this run, or undefined (absent, malformed or forged). */
  async readSlashSource(runtime: AgentRuntime): Promise<string | undefined> {
    const raw = runtime.scope.get<unknown>(this.slashSourceKey);
    if (!isRecord(raw)) return undefined;
    const { version, run_id, path, mac } = raw;
    if (version !== SLASH_SOURCE_VERSION || run_id !== runtime.runId) return undefined;
    if (typeof path !== "string" || path === "" || typeof mac !== "string") return undefined;
    return (await this.#verify("slash_source", { version, run_id, path }, mac)) ? path : undefined;
  }

  async storeDecision(runtime: AgentRuntime, decision: PolicyDecision): Promise<void> {
    const fields = {
      version: POLICY_DECISION_VERSION,
      run_id: runtime.runId,
      source: decision.source,
      active_paths: [...decision.activePaths],
      allowed_names: decision.allowedNames === null ? null : [...decision.allowedNames].sort(),
    };
    const mac = await this.#sign("tool_policy_decision", fields);
    // An unsignable decision (a path holding a lone surrogate) is simply not cached: tool calls
    // then resolve the policy live, which is slower but never wrong.
    if (mac === undefined) this.clearDecision(runtime);
    else runtime.scope.set(this.decisionKey, { ...fields, mac } satisfies StoredPolicyDecision);
  }

  clearDecision(runtime: AgentRuntime): void {
    runtime.scope.delete(this.decisionKey);
  }

  /** The stored decision when it is well-formed, signed by this pair and made in this run; otherwise undefined. */
  async readDecision(runtime: AgentRuntime): Promise<PolicyDecision | undefined> {
    const raw = runtime.scope.get<unknown>(this.decisionKey);
    if (!isRecord(raw)) return undefined;
    const { version, run_id, source, active_paths, allowed_names, mac } = raw;
    // typeof first: `true == 1`-style coercions must not pass for a version.
    if (typeof version !== "number" || version !== POLICY_DECISION_VERSION || run_id !== runtime.runId) return undefined;
    if (!isOneOf(POLICY_SOURCES, source)) return undefined;
    if (!isStringArray(active_paths)) return undefined;
    if (allowed_names !== null && !isStringArray(allowed_names)) return undefined;
    if (typeof mac !== "string") return undefined;
    const fields = { version, run_id, source, active_paths, allowed_names };
    if (!(await this.#verify("tool_policy_decision", fields, mac))) return undefined;
    return { source: source as PolicySource, activePaths: active_paths, allowedNames: allowed_names };
  }

  async #sign(purpose: string, fields: Record<string, unknown>): Promise<string | undefined> {
    const data = encode(purpose, fields);
    if (data === undefined) return undefined;
    const signature = await crypto.subtle.sign("HMAC", await this.#key, data);
    return bytesToHex(new Uint8Array(signature));
  }

  async #verify(purpose: string, fields: Record<string, unknown>, mac: string): Promise<boolean> {
    const data = encode(purpose, fields);
    if (!HEX_MAC.test(mac) || data === undefined) return false;
    // subtle.verify compares in constant time; a string comparison of two MACs would not.
    return crypto.subtle.verify("HMAC", await this.#key, hexToBytes(mac), data);
  }
}

/** Throws unless `binding` is a real binding: the pair refuses to run unauthenticated. */
export function requireSkillChainBinding(binding: unknown, middlewareName: string): SkillChainBinding {
  if (binding instanceof SkillChainBinding) return binding;
  throw new DeerflowError(
    "skill_chain_binding_required",
    `${middlewareName} needs the binding it shares with its partner middleware; build both with createSkillMiddlewares({ registry }).`,
  );
}

/** The signed bytes, or undefined for values canonical JSON refuses (lone surrogates). */
function encode(purpose: string, fields: Record<string, unknown>): Uint8Array<ArrayBuffer> | undefined {
  let json: string;
  try {
    json = canonicalJson({ purpose, ...fields });
  } catch (error) {
    if (error instanceof CanonicalJsonError) return undefined;
    throw error;
  }
  return new TextEncoder().encode(json);
}

function isStringArray(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((item) => typeof item === "string");
}
