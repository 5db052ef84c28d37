import { describe, expect, it } from "vitest";
import { createBunEnv } from "../../adapters/bun/env.ts";
import { createDenoEnv } from "../../adapters/deno/env.ts";
import { createNodeEnv } from "../../adapters/node/env.ts";
import { mapEnv } from "../../src/core/env.ts";
import type { Env } from "../../src/ports/runtime-ports.ts";

const g = globalThis as { Deno?: unknown; Bun?: unknown };
const runtime = g.Deno ? "deno" : g.Bun ? "bun" : "node";

describe("mapEnv", () => {
  it("reads the record it was given, as a copy", () => {
    const record: Record<string, string | undefined> = { A: "1", EMPTY: "", GONE: undefined };
    const env = mapEnv(record);
    record.A = "changed";
    expect(env.get("A")).toBe("1");
    expect(env.get("EMPTY")).toBe("");
    expect(env.get("GONE")).toBeUndefined();
    expect(env.get("MISSING")).toBeUndefined();
  });

  it("does not answer with inherited object properties", () => {
    const env = mapEnv({});
    expect(env.get("constructor")).toBeUndefined();
    expect(env.get("toString")).toBeUndefined();
    expect(env.get("__proto__")).toBeUndefined();
  });
});

describe(`runtime Env (${runtime})`, () => {
  const env: Env = runtime === "deno" ? createDenoEnv() : runtime === "bun" ? createBunEnv() : createNodeEnv();
  // Set the way a program on this runtime sets it: on Deno through Deno.env, since in a worker
  // thread (where the Deno test run puts each file) process.env is the thread's own copy.
  const hostEnv = g.Deno
    ? (g.Deno as { env: { set(name: string, value: string): void; delete(name: string): void } }).env
    : (() => {
        const env = (globalThis as { process?: { env: Record<string, string | undefined> } }).process!.env;
        return { set: (name: string, value: string) => void (env[name] = value), delete: (name: string) => void delete env[name] };
      })();

  it("reads a variable set in this process, and undefined for a missing one", () => {
    hostEnv.set("DEERFLOW_EDGE_ENV_TEST", "value ✓");
    try {
      expect(env.get("DEERFLOW_EDGE_ENV_TEST")).toBe("value ✓");
    } finally {
      hostEnv.delete("DEERFLOW_EDGE_ENV_TEST");
    }
    expect(env.get("DEERFLOW_EDGE_ENV_TEST")).toBeUndefined();
    expect(env.get("constructor")).toBeUndefined();
  });

  it("returns undefined instead of throwing for names the runtime refuses", () => {
    expect(env.get("")).toBeUndefined();
    expect(env.get("A=B")).toBeUndefined();
  });
});
