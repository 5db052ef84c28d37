// AsyncLocalStorage first: LangGraph's interrupt() reads its config from it
// (docs/toolchain.md, AsyncLocalStorage in every entry).
import "../shared/als.ts";
import { main } from "../../src/cli/main.ts";
import { createCliHost } from "../shared/cli-host.ts";
import { createNodeSandboxWorkers } from "./sandbox-worker.ts";
import { processTerminal } from "../shared/process-terminal.ts";
import { serveNode } from "./serve.ts";
import { createNodeEnv } from "./env.ts";
import { reclaimV8Memory } from "../shared/v8-memory.ts";
import { createNodeProcessRunner } from "./process-runner.ts";

const code = await main(
  createCliHost({
    ...processTerminal(),
    env: createNodeEnv(),
    runner: createNodeProcessRunner(),
    sandboxWorkers: createNodeSandboxWorkers(),
    serve: serveNode,
    reclaimMemory: reclaimV8Memory,
  }),
);
// Let buffered output drain, then leave even if a library kept a timer alive.
process.stdout.write("", () => process.exit(code));
