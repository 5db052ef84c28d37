/**
 * Serves bench/lgapi/graph.ts with the official LangGraph API server (startServer from
 * @langchain/langgraph-api/server, no CLI), for bench/gateway.ts.
 *
 * Run from anywhere: `tsx --expose-gc bench/lgapi/serve.ts <port> <workers> <cwd> [<file>:<export>]`,
 * the last the graph to serve as assistant "agent" (default: graph.ts's bare loop; bench/gateway.ts
 * also gives it bench/lead-agent.ts's lead agent). The API server
 * persists `.langgraph_api/` in <cwd> (docs/toolchain.md, The LangGraph API server baseline), so
 * the bench passes a temp dir.
 * Set LANGGRAPH_CLI_NO_ANALYTICS=1 and LOG_LEVEL=warn in its environment (the bench does).
 *
 * Protocol on stdio (the server's own log also goes to stdout, so control lines carry a marker):
 * - out `{"bench_server":"listening","url":"http://127.0.0.1:<port>"}` once ready;
 * - in `memory` → out `{"bench_server":"memory","heap_used":<bytes>,"rss":<bytes>,"gc":<bool>}`,
 *   measured after a full collection;
 * - in `exit` (or stdin closed) → flushes, closes the server, exits 0.
 */
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

interface StartServer {
  (options: { port: number; nWorkers: number; host: string; cwd: string; graphs: Record<string, string> }): Promise<{ host: string; cleanup: () => Promise<void> }>;
}

function control(record: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(record)}\n`);
}

async function main(): Promise<void> {
  const [portArg = "0", workersArg = "10", cwd = process.cwd(), graphArg] = process.argv.slice(2);
  // A non-literal specifier: the project's tsc checks bench/ too, and must pass when this folder
  // has not been installed.
  const serverModule = "@langchain/langgraph-api/server";
  const { startServer } = (await import(serverModule)) as { startServer: StartServer };
  const graphFile = fileURLToPath(new URL("./graph.ts", import.meta.url));
  const { host, cleanup } = await startServer({
    port: Number(portArg),
    nWorkers: Number(workersArg),
    host: "127.0.0.1",
    cwd,
    graphs: { agent: graphArg ?? `${graphFile}:graph` },
  });
  control({ bench_server: "listening", url: `http://${host}` });

  let exiting = false;
  const exit = async (): Promise<void> => {
    if (exiting) return;
    exiting = true;
    await cleanup().catch(() => undefined);
    process.exit(0);
  };
  const lines = createInterface({ input: process.stdin });
  lines.on("line", (line) => {
    const command = line.trim();
    if (command === "memory") {
      // Two passes, as bench/gateway-ours.ts measures deerflow-edge.
      const gc = (globalThis as { gc?: () => void }).gc;
      gc?.();
      setTimeout(() => {
        gc?.();
        const usage = process.memoryUsage();
        control({ bench_server: "memory", heap_used: usage.heapUsed, rss: usage.rss, gc: gc !== undefined });
      }, 50);
    } else if (command === "exit") {
      void exit();
    }
  });
  lines.on("close", () => void exit());
  process.on("SIGTERM", () => void exit());
}

main().catch((error) => {
  control({ bench_server: "failed", error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
  process.exit(1);
});
