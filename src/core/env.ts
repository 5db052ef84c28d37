import type { Env } from "../ports/runtime-ports.ts";

/** An Env over a fixed record, for tests and embedding. The record is copied; later edits to it are not seen. */
export function mapEnv(record: Readonly<Record<string, string | undefined>>): Env {
  const values = new Map<string, string>();
  for (const [name, value] of Object.entries(record)) {
    if (typeof value === "string") values.set(name, value);
  }
  return { get: (name) => values.get(name) };
}
