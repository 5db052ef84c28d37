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
import { checkFinalValues, readFrames } from "./gateway-sse.ts";

const TOPICS = ["portable runtimes", "edge caching", "stream resumption", "sandbox limits"];

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

async function call(gateway: BenchGateway, method: string, path: string, body?: unknown): Promise<Response> {
  return gateway.fetch(
    new Request(`http://127.0.0.1/api${path}`, {
      method,
      headers: { "content-type": "application/json", accept: "text/event-stream" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    }),
  );
}

/**
 * One demo run through `gateway.fetch`, checked: creates a thread and streams one run
 * (POST /threads/{id}/runs/stream, values + messages-tuple, read to the end) with a "Write a note
 * about <topic> (<index>) and count its words." prompt, which makes the demo model call write_file
 * and bash. Throws on an error frame, or when the final state lacks either tool result or the answer.
 */
export async function demoRun(gateway: BenchGateway, index: number): Promise<void> {
  const created = await call(gateway, "POST", "/threads", { metadata: {} });
  const threadId = ((await created.json()) as { thread_id: string }).thread_id;
  const topic = TOPICS[index % TOPICS.length]!;
  const response = await call(gateway, "POST", `/threads/${threadId}/runs/stream`, {
    assistant_id: gateway.assistantId,
    input: { messages: [{ role: "user", content: `Write a note about ${topic} (${index}) and count its words.` }] },
    stream_mode: ["values", "messages-tuple"],
  });
  if (!response.ok || response.body === null) throw new Error(`runs/stream answered ${response.status}: ${await response.text()}`);
  let lastValues: string | undefined;
  let errorFrame: string | undefined;
  await readFrames(response.body, (event, data) => {
    if (event === "values") lastValues = data;
    if (event === "error") errorFrame = data;
  });
  if (errorFrame !== undefined) throw new Error(`error frame ${errorFrame.slice(0, 300)}`);
  const problem = checkFinalValues(lastValues);
  if (problem !== null) throw new Error(problem);
}
