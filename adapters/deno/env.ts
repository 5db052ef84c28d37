import type { Env } from "../../src/ports/runtime-ports.ts";

// Only what this file uses; the project type-checks with @types/node, not Deno's lib.
declare const Deno: {
  env: { get(name: string): string | undefined };
  permissions: { querySync(descriptor: { name: "env"; variable: string }): { state: "granted" | "denied" | "prompt" } };
};

/**
 * Deno's environment. A variable this process may not read (no --allow-env for it) reads as
 * undefined: the permission is queried first, so Deno never stops to prompt on a terminal.
 */
export function createDenoEnv(): Env {
  return {
    get(name) {
      try {
        if (Deno.permissions.querySync({ name: "env", variable: name }).state !== "granted") return undefined;
        return Deno.env.get(name);
      } catch {
        // NotCapable / PermissionDenied, or a name Deno refuses ("", "A=B"): nothing to read.
        return undefined;
      }
    },
  };
}
