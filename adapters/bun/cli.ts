// AsyncLocalStorage first: LangGraph's interrupt() reads its config from it (toolchain P3).
import "../shared/als.ts";
import { main } from "../../src/cli/main.ts";
import { createCliHost } from "../shared/cli-host.ts";
import { serveBun } from "./serve.ts";
import { createBunEnv } from "./env.ts";
import { createBunProcessRunner } from "./process-runner.ts";

const code = await main(
  createCliHost({
    argv: process.argv.slice(2),
    env: createBunEnv(),
    runner: createBunProcessRunner(),
    stdout: { write: (text) => void process.stdout.write(text), isTTY: Boolean(process.stdout.isTTY) },
    stderr: { write: (text) => void process.stderr.write(text), isTTY: Boolean(process.stderr.isTTY) },
    onInterrupt(handler) {
      process.on("SIGINT", handler);
      process.on("SIGTERM", handler);
      return () => {
        process.off("SIGINT", handler);
        process.off("SIGTERM", handler);
      };
    },
    serve: serveBun,
  }),
);
process.exit(code);
