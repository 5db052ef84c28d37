/**
 * The host's effective limits, as an extension may read them. A projection, not the host config:
 * extensions see the numbers that govern a run, never the config object they came from. Every field
 * but `tokenBudgetEnabled` is absent when the host sets no limit, so the contract can grow by adding
 * optional fields without breaking an extension that reads the old ones.
 */
export interface HostPolicySnapshot {
  readonly tokenBudgetEnabled: boolean;
  readonly maxInputTokens?: number;
  readonly maxOutputTokens?: number;
  readonly maxTotalTokens?: number;
  /** Fraction of a budget at which the host warns, in (0, 1]. */
  readonly budgetWarnFraction?: number;
  /** Fraction of a budget at which the host stops the run, in (0, 1]. */
  readonly budgetHardFraction?: number;
  readonly maxSubagentsPerRun?: number;
}

const OPTIONAL_FIELDS = [
  "maxInputTokens",
  "maxOutputTokens",
  "maxTotalTokens",
  "budgetWarnFraction",
  "budgetHardFraction",
  "maxSubagentsPerRun",
] as const;

/**
 * A frozen snapshot from the given fields. Undefined and null fields are dropped rather than kept
 * as `undefined`, so `"maxInputTokens" in policy` answers "is there a limit".
 */
export function hostPolicySnapshot(fields: Partial<Record<keyof HostPolicySnapshot, unknown>> = {}): HostPolicySnapshot {
  const snapshot: Record<string, unknown> = { tokenBudgetEnabled: fields.tokenBudgetEnabled === true };
  for (const key of OPTIONAL_FIELDS) {
    const value = fields[key];
    if (typeof value === "number" && Number.isFinite(value)) snapshot[key] = value;
  }
  return Object.freeze(snapshot) as unknown as HostPolicySnapshot;
}

/** No token budget, no limits: what an extension sees when the host configures none. */
export const EMPTY_HOST_POLICY: HostPolicySnapshot = hostPolicySnapshot();
