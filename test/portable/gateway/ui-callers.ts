import type { AgentAssemblyDescriptor } from "../../../src/extension-api/index.ts";
import type { ModuleLoader } from "../../../src/ports/module-loader.ts";
import type { SendOptions } from "../../fixtures/plugins/gateway-harness.ts";

/*
 * The callers the UI route tests (ui-*.test.ts) use: api_key auth with an administrator (ops) and
 * two users (u1, u2), so each test can check who may read, who may change, and whose thread is whose.
 */

export const ADMIN_KEY = "admin-key-0123456789abcdef";
export const USER_KEY = "user-key-0123456789abcdef";
export const OTHER_KEY = "other-key-0123456789abcdef";
/** The variables the api keys are read from. */
export const ENV: Readonly<Record<string, string>> = { ADMIN_KEY, USER_KEY, OTHER_KEY };
export const auth = {
  mode: "api_key",
  api_keys: [
    { key_env: "ADMIN_KEY", user_id: "ops", role: "admin" },
    { key_env: "USER_KEY", user_id: "u1", role: "user" },
    { key_env: "OTHER_KEY", user_id: "u2", role: "user" },
  ],
} as const;
export const admin: SendOptions = { headers: { "x-api-key": ADMIN_KEY } };
export const user: SendOptions = { headers: { "x-api-key": USER_KEY } };
export const other: SendOptions = { headers: { "x-api-key": OTHER_KEY } };
export const withBody = (who: SendOptions, body: unknown): SendOptions => ({ ...who, body });

/** A loader for `plugins: [{ use: "./observer.ts:install" }]`: every descriptor the gateway's assemblies report, through a real agent-assembly observer. */
export function assemblyObservingLoader(seen: AgentAssemblyDescriptor[]): ModuleLoader {
  return {
    async load() {
      return {
        install: (registry: { agentAssemblyObserver(o: { onAgentAssembled(d: AgentAssemblyDescriptor): void }): void }) =>
          registry.agentAssemblyObserver({ onAgentAssembled: (descriptor) => void seen.push(descriptor) }),
      };
    },
  };
}
