// deerflow-edge as a Cloudflare Worker: the LangGraph Platform API over memory storage and the
// virtual sandbox, configured by bindings. Needs the nodejs_compat flag (AsyncLocalStorage).
// The bindings are the Deno Deploy entry's variables (src/cli/deploy-env.ts; README, "Deploy to
// Deno Deploy"): DEERFLOW_API_KEY (a secret) and DEERFLOW_MODEL* for the common case, or
//   DEERFLOW_CONFIG   config.yaml's text (YAML or JSON); gateway.auth is required
//   <key_env names>   secrets the config names: the model's api_key_env, the gateway's api_keys' key_env
// Build: npm run build:worker (esbuild, dist/worker/: the entry deerflow-edge-worker.mjs and the
// sandbox's chunk), then upload those modules with nodejs_compat, or serve them locally with
// workerd (test/portable/gateway/cloudflare-worker.test.ts writes such a config).
import "../adapters/shared/als.ts";
import { createWorkerHandler } from "../adapters/workers/gateway.ts";

export default createWorkerHandler();
