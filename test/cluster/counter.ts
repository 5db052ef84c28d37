// Where the count_run tool (count-run-plugin.ts) reports: one POST per tool call, keyed by the
// run id the tool read from its runtime, with the worker that executed it and the step. A run
// executed twice shows as a count of 2; a lost one as a missing key.
import { createServer } from "node:http";
import { listenLoopback, readJson } from "./loopback.ts";

export interface CountedCall {
  readonly runId: string;
  readonly threadId: string | undefined;
  /** The worker label of the process whose tool called (the harness gives each its own). */
  readonly worker: string;
  readonly step: number;
  /** performance.now() of the test process when the call arrived. */
  readonly at: number;
}

export interface RunCounter {
  /** The URL the tool POSTs to. */
  readonly url: string;
  readonly calls: readonly CountedCall[];
  /** Tool calls per run id. */
  counts(): Map<string, number>;
  callsOf(runId: string): CountedCall[];
  close(): Promise<void>;
}

export async function startRunCounter(): Promise<RunCounter> {
  const calls: CountedCall[] = [];
  const server = createServer((req, res) => {
    readJson(req).then(
      (body) => {
        if (typeof body.run_id !== "string" || body.run_id === "") {
          res.writeHead(400, { "content-type": "application/json" }).end(JSON.stringify({ error: "run_id is required" }));
          return;
        }
        const threadId = typeof body.thread_id === "string" ? body.thread_id : undefined;
        const call: CountedCall = { runId: body.run_id, threadId, worker: String(body.worker ?? ""), step: Number(body.step ?? 0), at: performance.now() };
        calls.push(call);
        const count = calls.filter((c) => c.runId === call.runId).length;
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ count }));
      },
      (error: unknown) => res.writeHead(400, { "content-type": "application/json" }).end(JSON.stringify({ error: String(error) })),
    );
  });
  const listening = await listenLoopback(server);
  return {
    url: `${listening.url}/count`,
    calls,
    counts() {
      const counts = new Map<string, number>();
      for (const call of calls) counts.set(call.runId, (counts.get(call.runId) ?? 0) + 1);
      return counts;
    },
    callsOf: (runId) => calls.filter((c) => c.runId === runId),
    close: listening.close,
  };
}
