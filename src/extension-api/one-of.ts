/**
 * Whether `value` is one of a closed list of string values (a frozen `*_VALUES` or `*_STATUSES`
 * list): the one type guard behind every `isPlacement`-style check, at the lowest floor so any
 * folder may use it.
 */
export function isOneOf<T extends string>(values: readonly T[], value: unknown): value is T {
  return typeof value === "string" && (values as readonly string[]).includes(value);
}
