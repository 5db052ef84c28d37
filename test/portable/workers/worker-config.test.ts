// The Cloudflare Workers adapter's config: the Deploy entries' variables or DEERFLOW_CONFIG through
// config.yaml's schema, memory storage unless a driver is named, auth required, and one sentence
// for what a Worker cannot do.
import { describe, expect, it } from "vitest";
import { createBindingsEnv, workerConfig } from "../../../adapters/workers/gateway.ts";

const failure = (fn: () => unknown): { code?: string; message: string } => {
  try {
    fn();
  } catch (error) {
    return error as { code?: string; message: string };
  }
  throw new Error("expected it to throw");
};

const AUTH_JSON = { auth: { mode: "api_key", api_keys: [{ key_env: "DEERFLOW_API_KEY", user_id: "me" }] } };
/** A gateway section with auth, as YAML (JSON is YAML), for the DEERFLOW_CONFIG texts below. */
const AUTH = `gateway: ${JSON.stringify(AUTH_JSON)}`;

describe("workerConfig", () => {
  it("without DEERFLOW_CONFIG: the Deploy entries' variables, over memory storage and the virtual sandbox", () => {
    const config = workerConfig({ DEERFLOW_API_KEY: "k-1", DEERFLOW_MODEL: "gpt-4o-mini", DEERFLOW_MODEL_API_KEY: "sk-1", DEERFLOW_KV_PATH: "/ignored" });
    expect(config.storage.driver).toBe("memory");
    expect(config.storage.path).toBeUndefined();
    expect(config.sandbox.use).toBe("virtual");
    expect(config.gateway?.auth.mode).toBe("api_key");
    expect(config.models.map((model) => model.model)).toEqual(["gpt-4o-mini"]);
    expect(workerConfig({ DEERFLOW_API_KEY: "k-1" }).models).toEqual([]);
  });

  it("refuses to start without auth, naming the variables to set", () => {
    for (const bindings of [{}, { DEERFLOW_CONFIG: "storage: {}" }, { DEERFLOW_CONFIG: "gateway: { auth: { mode: disabled } }" }]) {
      const error = failure(() => workerConfig(bindings));
      expect(error.code, JSON.stringify(bindings)).toBe("deploy_env_invalid");
      expect(error.message).toContain("DEERFLOW_API_KEY");
      expect(error.message.split("\n")).toHaveLength(1);
    }
  });

  it("keeps memory storage when the storage section is empty, null or names only other keys", () => {
    for (const storage of ["storage: {}", "storage:", "storage: { base: data }"]) {
      expect(workerConfig({ DEERFLOW_CONFIG: `${storage}\n${AUTH}` }).storage.driver, storage).toBe("memory");
    }
  });

  it("reads JSON too, and validates it with config.yaml's schema, naming the key path", () => {
    expect(workerConfig({ DEERFLOW_CONFIG: `{"agent":{"recursion_limit":40},"gateway":${JSON.stringify(AUTH_JSON)}}` }).agent.recursion_limit).toBe(40);
    const error = failure(() => workerConfig({ DEERFLOW_CONFIG: "agent:\n  recursion_limt: 40\n" }));
    expect(error.code).toBe("config_invalid");
    expect(error.message).toContain("DEERFLOW_CONFIG");
    expect(error.message).toContain("agent.recursion_limt");
  });

  it("refuses text that is not YAML, naming the binding", () => {
    const error = failure(() => workerConfig({ DEERFLOW_CONFIG: "models: [\n" }));
    expect(error.code).toBe("config_not_yaml");
    expect(error.message).toContain("DEERFLOW_CONFIG");
  });

  it("refuses what needs a disk, processes or files, in one sentence each", () => {
    const cases: Array<[string, string[]]> = [
      ["storage: { driver: fs }", ['storage.driver "fs"', "driver: memory"]],
      ["storage: { driver: deno-kv }", ['storage.driver "deno-kv"', "Deno"]],
      ["sandbox: { use: local }", ['sandbox.use "local"', "use virtual"]],
      ["plugins: [{ name: a, use: ./a.ts:install }]", ["plugins loads", "remove it"]],
      ["extensions: { middlewares: [./m.ts:M] }\nskills: { path: ./skills }", ["extensions.middlewares, skills.path load", "remove them"]],
    ];
    for (const [text, parts] of cases) {
      const error = failure(() => workerConfig({ DEERFLOW_CONFIG: `${text}\n${AUTH}` }));
      expect(error.code, text).toBe("worker_config_invalid");
      for (const part of parts) expect(error.message, text).toContain(part);
      expect(error.message.split("\n")).toHaveLength(1);
    }
  });

  it("refuses a DEERFLOW_CONFIG binding that is not text", () => {
    const error = failure(() => workerConfig({ DEERFLOW_CONFIG: { models: [] } }));
    expect(error.code).toBe("worker_config_invalid");
    expect(error.message).toContain("text binding");
  });
});

describe("createBindingsEnv", () => {
  it("reads text bindings (vars and secrets) and nothing else", () => {
    const env = createBindingsEnv({ OPENAI_API_KEY: "sk-1", CACHE: { get() {} }, COUNT: 3 });
    expect(env.get("OPENAI_API_KEY")).toBe("sk-1");
    expect(env.get("CACHE")).toBeUndefined();
    expect(env.get("COUNT")).toBeUndefined();
    expect(env.get("MISSING")).toBeUndefined();
  });
});
