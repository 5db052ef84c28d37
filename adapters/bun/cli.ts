// AsyncLocalStorage first: LangGraph's interrupt() reads its config from it
// (docs/toolchain.md, AsyncLocalStorage in every entry).
import "../shared/als.ts";
import { main } from "../../src/cli/main.ts";
import { createCliHost } from "../shared/cli-host.ts";
import { createWebSandboxWorkers } from "../shared/web-sandbox-worker.ts";
import { processTerminal } from "../shared/process-terminal.ts";
import { serveBun } from "./serve.ts";
import { createBunEnv } from "./env.ts";
import { reclaimBunMemory } from "./memory.ts";
import { createBunProcessRunner } from "./process-runner.ts";

const code = await main(
  createCliHost({
    ...processTerminal(),
    env: createBunEnv(),
    runner: createBunProcessRunner(),
    sandboxWorkers: createWebSandboxWorkers(),
    serve: serveBun,
    reclaimMemory: reclaimBunMemory,
  }),
);
process.exit(code);
