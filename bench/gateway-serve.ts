/**
 * deerflow-edge's gateway (bench/gateway-ours.ts, memory storage) in a process of its own, for the
 * memory figures of bench/gateway.ts; started by startOursProcess under the bench's runtime.
 * Speaks the stdio protocol of bench/lgapi/serve.ts:
 * - out `{"bench_server":"listening","url":"http://127.0.0.1:<port>","assistant_id":...}`;
 * - in `memory` → out `{"bench_server":"memory","heap_used":<bytes>,"rss":<bytes>}` after a full gc;
 * - in `exit` (or stdin closed) → shuts the gateway down and exits 0.
 */
// Installed first, as in the other benches
// (docs/toolchain.md, AsyncLocalStorage before any import).
import "../adapters/shared/als.ts";
import process from "node:process";
import { createInterface } from "node:readline";
import { startOurs } from "./gateway-ours.ts";
import { runtimeInfo } from "./harness.ts";

function control(record: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(record)}\n`);
}

async function main(): Promise<void> {
  const server = await startOurs({ storage: "memory", runtime: runtimeInfo().runtime });
  control({ bench_server: "listening", url: server.target.apiUrl.replace(/\/api$/, ""), assistant_id: server.target.assistantId });
  let exiting = false;
  const exit = async (): Promise<void> => {
    if (exiting) return;
    exiting = true;
    await server.close().catch(() => undefined);
    process.exit(0);
  };
  const lines = createInterface({ input: process.stdin });
  lines.on("line", (line) => {
    const command = line.trim();
    if (command === "memory") void server.memory().then((usage) => control({ bench_server: "memory", ...usage }));
    else if (command === "exit") void exit();
  });
  lines.on("close", () => void exit());
}

main().catch((error) => {
  control({ bench_server: "failed", error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
  process.exit(1);
});
