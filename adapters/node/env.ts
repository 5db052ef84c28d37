import type { Env } from "../../src/ports/runtime-ports.ts";

/** This process's environment, read at each call. */
export function createNodeEnv(): Env {
  return {
    get(name) {
      const value = process.env[name];
      return typeof value === "string" ? value : undefined;
    },
  };
}
