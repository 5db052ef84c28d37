// The Deploy entries' configuration from environment variables: the config object config.yaml
// would give, through the same schema, and every refusal naming the variable to set or fix.
import { describe, expect, it } from "vitest";
import { DEPLOY_ENV, DeployEnvError, deployConfigFromEnv } from "../../../src/cli/deploy-env.ts";
import { mapEnv } from "../../../src/core/env.ts";
import { buildTestGateway, login, passwordHash } from "../gateway/auth-fixtures.ts";

const KEY = "deploy-key-0123456789abcdef";
const config = (vars: Record<string, string>) => deployConfigFromEnv(mapEnv(vars));

function refusal(vars: Record<string, string>): string {
  try {
    config(vars);
  } catch (error) {
    expect(error).toBeInstanceOf(DeployEnvError);
    expect((error as DeployEnvError).code).toBe("deploy_env_invalid");
    return (error as Error).message;
  }
  throw new Error("expected the environment to be refused");
}

describe("deployConfigFromEnv", () => {
  it("an API key alone: api_key auth for user deploy, Deno KV's default database, the virtual sandbox, the demo model", () => {
    const built = config({ DEERFLOW_API_KEY: KEY });
    expect(built.gateway?.auth).toMatchObject({ mode: "api_key", api_keys: [{ key_env: "DEERFLOW_API_KEY", user_id: "deploy", role: "user" }], users: [] });
    expect(built.storage).toEqual({ driver: "deno-kv", base: ".deer-flow" });
    expect(built.sandbox.use).toBe("virtual");
    expect(built.models).toEqual([]);
  });

  it("a model from its variables: id, endpoint, the key or the name of the variable holding it, a timeout", () => {
    const direct = config({ DEERFLOW_API_KEY: KEY, DEERFLOW_MODEL: "deepseek-chat", DEERFLOW_MODEL_BASE_URL: "https://api.deepseek.com/v1", DEERFLOW_MODEL_API_KEY: "sk-1", DEERFLOW_MODEL_TIMEOUT_MS: "30000" });
    expect(direct.models).toEqual([
      expect.objectContaining({ name: "default", use: "openai-compatible", model: "deepseek-chat", base_url: "https://api.deepseek.com/v1", api_key_env: "DEERFLOW_MODEL_API_KEY", timeout_ms: 30_000 }),
    ]);
    const named = config({ DEERFLOW_API_KEY: KEY, DEERFLOW_MODEL: "gpt-4o-mini", DEERFLOW_MODEL_API_KEY_ENV: "OPENAI_API_KEY", OPENAI_API_KEY: "sk-2", DEERFLOW_MODEL_NAME: "gpt" });
    expect(named.models[0]).toMatchObject({ name: "gpt", api_key_env: "OPENAI_API_KEY", base_url: "https://api.openai.com/v1" });
  });

  it("a password hash: session auth for an admin user who can log in with that password", async () => {
    const hash = await passwordHash("correct horse battery");
    const built = config({ DEERFLOW_ADMIN_PASSWORD_HASH: hash, DEERFLOW_ADMIN_USER: "ops", DEERFLOW_CORS_ORIGINS: "https://ui.example.com, http://localhost:3000" });
    expect(built.gateway?.auth).toMatchObject({ mode: "session", users: [{ id: "ops", role: "admin", password_hash: hash }], api_keys: [] });
    expect(built.gateway?.cors_origins).toEqual(["https://ui.example.com", "http://localhost:3000"]);
    const { app } = buildTestGateway({ gateway: built.gateway! });
    expect((await login(app, "ops", "correct horse battery")).access_token).not.toBe("");
  });

  it("both kinds: every credential is accepted, DEERFLOW_AUTH_MODE names the mode", async () => {
    const built = config({ DEERFLOW_API_KEY: KEY, DEERFLOW_ADMIN_PASSWORD_HASH: await passwordHash("correct horse battery"), DEERFLOW_AUTH_MODE: "session" });
    expect(built.gateway?.auth.mode).toBe("session");
    expect(built.gateway?.auth.api_keys).toHaveLength(1);
    expect(built.gateway?.auth.users).toHaveLength(1);
  });

  it("DEERFLOW_KV_PATH and DEERFLOW_SYSTEM_PROMPT land where config.yaml would put them", () => {
    const built = config({ DEERFLOW_API_KEY: KEY, DEERFLOW_KV_PATH: "data/deerflow.kv", DEERFLOW_SYSTEM_PROMPT: "Answer briefly." });
    expect(built.storage.path).toBe("data/deerflow.kv");
    expect(built.agent.system_prompt).toBe("Answer briefly.");
  });

  it("refuses no auth at all, naming the variables to set", () => {
    const message = refusal({ DEERFLOW_MODEL: "gpt-4o-mini", DEERFLOW_MODEL_API_KEY: "sk-1" });
    for (const name of [DEPLOY_ENV.apiKey, DEPLOY_ENV.adminPasswordHash, DEPLOY_ENV.authMode]) expect(message).toContain(name);
    expect(refusal({ DEERFLOW_API_KEY: "   " })).toMatch(/^No authentication configured/);
  });

  it("refuses a mode without its credential, and disabled", () => {
    expect(refusal({ DEERFLOW_AUTH_MODE: "api_key" })).toMatch(/^DEERFLOW_AUTH_MODE is api_key but DEERFLOW_API_KEY is not set/);
    expect(refusal({ DEERFLOW_AUTH_MODE: "session", DEERFLOW_API_KEY: KEY })).toMatch(/^DEERFLOW_AUTH_MODE is session but DEERFLOW_ADMIN_PASSWORD_HASH is not set/);
    expect(refusal({ DEERFLOW_AUTH_MODE: "disabled", DEERFLOW_API_KEY: KEY })).toMatch(/^DEERFLOW_AUTH_MODE: expected api_key or session, got "disabled"/);
  });

  it("names the variable whose value the schema refuses", () => {
    const base = { DEERFLOW_API_KEY: KEY };
    expect(refusal({ ...base, DEERFLOW_API_KEY_USER: "not an id!" })).toMatch(/^DEERFLOW_API_KEY_USER: expected a user id/);
    expect(refusal({ ...base, DEERFLOW_API_KEY_ROLE: "root" })).toMatch(/^DEERFLOW_API_KEY_ROLE: expected "admin" \| "user", got "root"/);
    expect(refusal({ DEERFLOW_ADMIN_PASSWORD_HASH: "hunter2" })).toMatch(/^DEERFLOW_ADMIN_PASSWORD_HASH: expected "pbkdf2-sha256\$/);
    expect(refusal({ ...base, DEERFLOW_CORS_ORIGINS: "https://ok.example.com,ui.example.com/app" })).toMatch(/^DEERFLOW_CORS_ORIGINS: expected an origin/);
    const model = { ...base, DEERFLOW_MODEL: "gpt-4o-mini", DEERFLOW_MODEL_API_KEY: "sk-1" };
    expect(refusal({ ...model, DEERFLOW_MODEL_BASE_URL: "api.example.com" })).toMatch(/^DEERFLOW_MODEL_BASE_URL: expected an http\(s\) URL/);
    expect(refusal({ ...model, DEERFLOW_MODEL_TIMEOUT_MS: "soon" })).toMatch(/^DEERFLOW_MODEL_TIMEOUT_MS: /);
    expect(refusal({ ...model, DEERFLOW_MODEL_TIMEOUT_MS: "0" })).toMatch(/^DEERFLOW_MODEL_TIMEOUT_MS: expected a number >= 1/);
    expect(refusal({ ...model, DEERFLOW_MODEL_NAME: "demo" })).toMatch(/^DEERFLOW_MODEL_NAME: "demo" is reserved/);
    expect(refusal({ ...base, DEERFLOW_MODEL: "gpt-4o-mini", DEERFLOW_MODEL_API_KEY_ENV: "not a name" })).toMatch(/^DEERFLOW_MODEL_API_KEY_ENV: expected an environment variable name/);
  });

  it("refuses a model without its key, and model variables without DEERFLOW_MODEL", () => {
    const base = { DEERFLOW_API_KEY: KEY };
    expect(refusal({ ...base, DEERFLOW_MODEL: "gpt-4o-mini" })).toMatch(/^DEERFLOW_MODEL is set but no key for it: set DEERFLOW_MODEL_API_KEY/);
    expect(refusal({ ...base, DEERFLOW_MODEL: "gpt-4o-mini", DEERFLOW_MODEL_API_KEY_ENV: "OPENAI_API_KEY" })).toMatch(/^DEERFLOW_MODEL_API_KEY_ENV names OPENAI_API_KEY, which is not set/);
    expect(refusal({ ...base, DEERFLOW_MODEL_BASE_URL: "https://api.deepseek.com/v1" })).toMatch(/^DEERFLOW_MODEL is not set, but other DEERFLOW_MODEL_\* variables are/);
  });

  it("DEERFLOW_CONFIG: config.yaml's whole text, storage on the platform's driver unless named, auth required", () => {
    const auth = 'gateway: { auth: { mode: api_key, api_keys: [{ key_env: DEERFLOW_API_KEY, user_id: ops }] } }';
    const built = config({ DEERFLOW_CONFIG: `${auth}\nagent: { recursion_limit: 40 }`, DEERFLOW_API_KEY: KEY, DEERFLOW_MODEL: "ignored" });
    expect(built.agent.recursion_limit).toBe(40);
    expect(built.storage.driver).toBe("deno-kv");
    expect(built.models).toEqual([]);
    expect(built.gateway?.auth.api_keys[0]?.user_id).toBe("ops");
    expect(deployConfigFromEnv(mapEnv({ DEERFLOW_CONFIG: auth }), "memory").storage.driver).toBe("memory");
    expect(refusal({ DEERFLOW_CONFIG: "agent: { recursion_limit: 40 }", DEERFLOW_API_KEY: KEY })).toMatch(/^DEERFLOW_CONFIG sets no gateway\.auth, .*set DEERFLOW_API_KEY\.$/);
    expect(refusal({ DEERFLOW_CONFIG: "gateway: { auth: { mode: disabled } }" })).toContain("DEERFLOW_CONFIG sets gateway.auth.mode disabled");
    // A key the schema refuses is named by its path in DEERFLOW_CONFIG.
    expect(() => config({ DEERFLOW_CONFIG: `${auth}\nagent: { recursion_limt: 40 }` })).toThrow(/DEERFLOW_CONFIG.*agent\.recursion_limt/s);
  });
});
