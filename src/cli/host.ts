import type { AppConfig } from "../config/index.ts";
import type { KeyValue } from "../ports/key-value.ts";
import type { Clock, Env } from "../ports/runtime-ports.ts";
import type { SandboxProvider } from "../ports/sandbox.ts";

export interface CliOutput {
  write(text: string): void;
  readonly isTTY: boolean;
}

/** What a runtime adapter provides so the CLI itself stays runtime-neutral. */
export interface CliHost {
  readonly argv: readonly string[];
  readonly env: Env;
  readonly clock: Clock;
  readonly stdout: CliOutput;
  readonly stderr: CliOutput;
  /** The file's text, or undefined when it does not exist. */
  readFile(path: string): Promise<string | undefined>;
  createStorage(config: AppConfig["storage"]): KeyValue;
  createSandboxProvider(config: AppConfig, storage: KeyValue): SandboxProvider;
  /** Registers a handler for Ctrl-C; returns a function that unregisters it. */
  onInterrupt(handler: () => void): () => void;
}
