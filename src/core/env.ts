/** Environment variables, read through a port so src/ never touches the runtime globals itself. */
export interface Env {
  get(name: string): string | undefined;
}

/** An Env over a fixed record, for tests and embedding. The record is copied; later edits to it are not seen. */
export function mapEnv(record: Readonly<Record<string, string | undefined>>): Env {
  const values = new Map<string, string>();
  for (const [name, value] of Object.entries(record)) {
    if (typeof value === "string") values.set(name, value);
  }
  return { get: (name) => values.get(name) };
}
