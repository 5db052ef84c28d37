import * as v from "valibot";
import { DeerflowError } from "../core/errors.ts";

/**
 * A built-in middleware's config, validated by its schema (undefined or null reads as `{}`). The
 * first issue fails with code `invalid_middleware_config` and a message that names the middleware,
 * the key's path and what to do: `<Name>.<key.path>: <issue>. <hint>`.
 */
export function parseMiddlewareConfig<TSchema extends v.GenericSchema>(
  schema: TSchema,
  input: unknown,
  middlewareName: string,
  hint = "Remove or fix this key.",
): v.InferOutput<TSchema> {
  const result = v.safeParse(schema, input ?? {});
  if (result.success) return result.output;
  const issue = result.issues[0];
  const path = v.getDotPath(issue);
  throw new DeerflowError("invalid_middleware_config", `${middlewareName}${path ? `.${path}` : ""}: ${issue.message}. ${hint}`);
}

/**
 * A pipe action for a config object: `high` may not be below `low`. The issue lands on `high`, the
 * key to fix, and is raised even when an unrelated key failed too.
 */
export function notBelow<TInput extends Record<THigh | TLow, number>, const THigh extends string, const TLow extends string>(
  high: THigh,
  low: TLow,
): v.BaseValidation<TInput, TInput, v.BaseIssue<unknown>> {
  type Values = Record<string, number>;
  const check = v.partialCheck<Values, readonly [readonly [string], readonly [string]], Values, string>(
    [[low], [high]],
    (values) => values[high]! >= values[low]!,
    `${high} must be greater than or equal to ${low}`,
  );
  return v.forward(check, [high]) as unknown as v.BaseValidation<TInput, TInput, v.BaseIssue<unknown>>;
}
