#!/usr/bin/env -S npx tsx
// AsyncLocalStorage first: LangGraph's interrupt() reads its config from it (toolchain P3).
import "../shared/als.ts";
import { main } from "../../src/cli/main.ts";
import { createCliHost } from "../shared/cli-host.ts";
import { serveNode } from "./serve.ts";
import { createNodeEnv } from "./env.ts";
import { createNodeProcessRunner } from "./process-runner.ts";

const code = await main(
  createCliHost({
    argv: process.argv.slice(2),
    env: createNodeEnv(),
    runner: createNodeProcessRunner(),
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
    serve: serveNode,
  }),
);
// Let buffered output drain, then leave even if a library kept a timer alive.
process.stdout.write("", () => process.exit(code));
