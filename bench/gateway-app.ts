/**
 * The gateway the bench serves: what `deerflow-edge serve` builds from the embedded defaults (demo
 * model, virtual sandbox over the same storage, auth disabled on a loopback address, no plugins,
 * MCP servers or configured middlewares; see src/cli/serve.ts), with the storage the bench chooses
 * instead of `.deer-flow/`. Its log goes to stderr, as the serve command's does.
 */
import { validateLeadConfig, type LeadConfig } from "../src/agents/app-config.ts";
import { createGateway } from "../src/gateway/app.ts";
import { LEAD_AGENT_ASSISTANT_ID } from "../src/gateway/routes/assistants.ts";
import type { KeyValue } from "../src/ports/key-value.ts";
import { createVirtualSandboxProvider } from "../src/sandbox/virtual.ts";

export interface BenchGateway {
  fetch(request: Request): Promise<Response>;
  readonly assistantId: string;
  shutdown(): Promise<void>;
}

/** The embedded defaults `deerflow-edge serve` starts from without a config file. */
export function benchConfig(): LeadConfig {
  return validateLeadConfig({}, "(embedded defaults)");
}

export async function createBenchGateway(storage: KeyValue): Promise<BenchGateway> {
  const config = benchConfig();
  const gateway = await createGateway({
    config,
    storage,
    sandbox: createVirtualSandboxProvider({ storage }),
    listening: { host: "127.0.0.1" },
    logger: {
      info: (message) => console.error(message),
      warn: (message) => console.error(`warning: ${message}`),
      error: (message) => console.error(`error: ${message}`),
    },
  });
  return { fetch: gateway.fetch, assistantId: LEAD_AGENT_ASSISTANT_ID, shutdown: () => gateway.shutdown() };
}
