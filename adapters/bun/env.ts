import type { Env } from "../../src/ports/runtime-ports.ts";

// Only what this file uses; the project type-checks with @types/node, not bun-types.
declare const Bun: { env: Record<string, string | undefined> };

/** Bun's environment (Bun.env, which mirrors process.env), read at each call. */
export function createBunEnv(): Env {
  return {
    get(name) {
      const value = Object.hasOwn(Bun.env, name) ? Bun.env[name] : undefined;
      return typeof value === "string" ? value : undefined;
    },
  };
}
