import process from "node:process";
import type { RuntimeBits } from "./cli-host.ts";

/** The terminal and the stop signals of a runtime with Node's `process` (Node and Bun). */
export function processTerminal(): Pick<RuntimeBits, "argv" | "stdout" | "stderr" | "onInterrupt"> {
  return {
    argv: process.argv.slice(2),
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
  };
}
