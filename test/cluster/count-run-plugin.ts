// The cluster's test plugin, loaded by every worker through config.yaml `plugins:` (Node, Deno and
// Bun alike: it uses fetch only): a middleware contributing the `count_run` tool, which POSTs the
// run id it reads from its runtime to the test process's counter (counter.ts). Config:
// `{ url, worker }` (the counter's URL; this worker's label, so a call says who executed it).
import { AgentScope, Placement, type ExtensionInstall } from "../../src/extension-api/index.ts";

interface CountRunContext {
  readonly toolCall: { readonly id?: string };
  readonly runtime: { readonly runId: string; readonly threadId: string | undefined; readonly signal?: AbortSignal };
}

export const install: ExtensionInstall = (registry, config) => {
  const url = String(config["url"] ?? "");
  const worker = String(config["worker"] ?? "");
  if (url === "") throw new Error("count_run needs `url` in its plugin config: the counter endpoint the tool reports to.");
  const countRun = {
    name: "count_run",
    description: "Counts one call of this run at the test's counter.",
    schema: { type: "object", properties: { step: { type: "integer" } }, additionalProperties: false },
    async invoke(args: Record<string, unknown>, context: CountRunContext): Promise<string> {
      const { runId, threadId, signal } = context.runtime;
      const response = await fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ run_id: runId, thread_id: threadId, worker, step: args["step"] ?? 0 }),
        ...(signal === undefined ? {} : { signal }),
      });
      if (!response.ok) throw new Error(`the counter answered ${response.status}: ${await response.text()}`);
      const { count } = (await response.json()) as { count: number };
      return `counted (${count})`;
    },
  };
  registry.middlewares({
    contributeMiddlewares: () => [{ middleware: { name: "count_run", tools: [countRun] }, placement: Placement.STANDARD, scope: AgentScope.LEAD }],
  });
};
