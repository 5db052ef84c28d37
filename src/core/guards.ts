/** A non-null, non-array object whose string keys can be read: what a parsed JSON object or a message's kwargs look like. */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
