/*
 * Identifiers: minting them, and the one format every id that names a storage key or a folder
 * follows. The alphabet is closed ([A-Za-z0-9_-]: no "/", no "..", no ":"), so an id is always a
 * safe path segment and two ids joined with ":" never collide.
 *
 * Two kinds differ only in their length limit, for a reason:
 * - a named id (NAMED_ID_MAX, 64) is one a caller picks or the gateway mints and hands out: thread
 *   ids, run ids, batch ids. A UUID (36) fits with room to spare.
 * - a scope id (SCOPE_ID_MAX, 128) is a segment of a sandbox's or thread data's scope: a user id
 *   (a foreign subject made safe keeps a readable head plus a digest) or a thread id the library
 *   derives, such as a subagent's (its parent's named id plus "-task-" and the tool call id). Every
 *   named id is also a scope id, so a thread the gateway accepts always gets a sandbox.
 */

/** Random identifiers from crypto.randomUUID (available on every supported runtime). */
export function newId(prefix?: string): string {
  const id = crypto.randomUUID();
  return prefix ? `${prefix}-${id}` : id;
}

/** Longest id a caller names or the gateway hands out (thread, run, batch). */
export const NAMED_ID_MAX = 64;
/** Longest segment of a sandbox or thread-data scope (user ids, derived thread ids). */
export const SCOPE_ID_MAX = 128;

/** A named id: 1 to NAMED_ID_MAX of [A-Za-z0-9_-]. */
export const NAMED_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
/** A scope id: 1 to SCOPE_ID_MAX of [A-Za-z0-9_-]. */
export const SCOPE_ID_PATTERN = /^[A-Za-z0-9_-]{1,128}$/;

export function isNamedId(value: unknown): value is string {
  return typeof value === "string" && NAMED_ID_PATTERN.test(value);
}

export function isScopeId(value: unknown): value is string {
  return typeof value === "string" && SCOPE_ID_PATTERN.test(value);
}

/** The words an error uses to say what a valid id looks like: `1-64 letters, digits, "_" or "-"`. */
export function idFormatHint(max: number): string {
  return `1-${max} letters, digits, "_" or "-"`;
}

/** `raw` with every character outside the id alphabet replaced by `replacement` (length unchanged). */
export function toIdAlphabet(raw: string, replacement: "_" | "-"): string {
  return raw.replace(/[^A-Za-z0-9_-]/g, replacement);
}
