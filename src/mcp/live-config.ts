import { DeerflowError, errorMessage } from "../core/errors.ts";
import type { AgentTool } from "../engine/types.ts";
import type { Env } from "../ports/runtime-ports.ts";
import type { McpClientDeps } from "./client.ts";
import { parseMcpServersConfig } from "./config.ts";
import { loadMcpTools, type McpServerFailure, type McpToolset } from "./tools.ts";

/*
 * extensions_config.json as a gateway serves it: read by the MCP settings routes, written by them,
 * and the MCP tools of the next run taken from whatever the file holds then. The file is re-read
 * before every run (one small read), so a write through the routes, by another gateway process on
 * the same files, or by hand takes effect on the next run without a restart. The toolset of the
 * previous text is closed once a new one replaced it.
 */

/** The file, through the port the host reads config with; `write` is absent where nothing may be written. */
export interface ExtensionsConfigFile {
  /** Named in messages (the path as the host spells it). */
  readonly fileName: string;
  /** The file's text, or undefined when it does not exist. */
  read(): Promise<string | undefined>;
  /** Replaces the file atomically (a temporary file in the same folder, then a rename). */
  readonly write?: (text: string) => Promise<void>;
}

export interface LiveMcpConfigOptions {
  readonly file: ExtensionsConfigFile;
  /** Resolves `$NAME` values of the servers' settings. */
  readonly env?: Env;
  /** What the MCP clients need (the stdio launcher, a fetch). */
  readonly client?: McpClientDeps;
  /** Told of every server left out of a toolset (unreachable, failing tools/list). */
  readonly onFailure?: (failure: McpServerFailure) => void;
  /** Why `file.write` is absent, for the refusal (default: the host has no writable file system). */
  readonly readOnlyReason?: string;
}

/** The MCP tools of the file as it is now; `revision` changes whenever the file's text does. */
export interface LiveMcpTools {
  readonly revision: string;
  readonly tools: readonly AgentTool[];
}

interface Loaded {
  readonly text: string;
  readonly toolset: Promise<McpToolset>;
}

const MAX_UPDATE_ATTEMPTS = 5;
const NO_TOOLS: LiveMcpTools = Object.freeze({ revision: "none", tools: Object.freeze([]) as readonly AgentTool[] });

export class LiveMcpConfig {
  readonly #options: LiveMcpConfigOptions;
  #loaded: Loaded | undefined;
  /** Writes, one at a time: each reads the file afresh under it, so no change overwrites another. */
  #writing: Promise<unknown> = Promise.resolve();
  #closed = false;
  /** Reads of the file for `current`, numbered, and the newest whose text is applied. */
  #reads = 0;
  #appliedRead = 0;

  constructor(options: LiveMcpConfigOptions) {
    this.#options = options;
  }

  get fileName(): string {
    return this.#options.file.fileName;
  }

  /** True when `update` may write the file. */
  get writable(): boolean {
    return this.#options.file.write !== undefined;
  }

  /** The whole file as JSON ({} when it does not exist); throws `extensions_config_invalid` when it is not an object. */
  async read(): Promise<Record<string, unknown>> {
    return parseFileText(await this.#options.file.read(), this.fileName);
  }

  /**
   * Read-modify-write under this process's write lock: `change` gets the current file (a copy) and
   * returns the new one, which must pass the same schema the loader uses (a ConfigError naming the
   * key otherwise, and the file is left as it was). Returns what was written.
   */
  update(change: (current: Record<string, unknown>) => Record<string, unknown> | Promise<Record<string, unknown>>): Promise<Record<string, unknown>> {
    const run = this.#writing.then(async () => {
      const write = this.#options.file.write;
      if (!write) {
        throw new DeerflowError(
          "extensions_config_read_only",
          `${this.fileName} cannot be written here: ${this.#options.readOnlyReason ?? "this host has no writable file system (Deno Deploy, Workers)"}. Edit the file where the gateway is deployed instead.`,
        );
      }
      // Another process over the same file (a second gateway worker) holds no part of this lock, so
      // the change is made again whenever the file moved while it was being made.
      for (let attempt = 1; ; attempt++) {
        const text = await this.#options.file.read();
        const next = await change(parseFileText(text, this.fileName));
        parseMcpServersConfig(next, { ...(this.#options.env ? { env: this.#options.env } : {}), fileName: this.fileName });
        if ((await this.#options.file.read()) !== text && attempt < MAX_UPDATE_ATTEMPTS) continue;
        await write(`${JSON.stringify(next, null, 2)}\n`);
        return next;
      }
    });
    this.#writing = run.catch(() => undefined);
    return run;
  }

  /**
   * The tools for a run starting now: those of the file's current text, loaded on first use of that
   * text and shared by every run until the text changes. No file: no tools. A file that no longer
   * passes its schema throws the ConfigError naming the key.
   */
  async current(): Promise<LiveMcpTools> {
    if (this.#closed) return NO_TOOLS;
    const read = ++this.#reads;
    const text = await this.#options.file.read();
    // A read that finished after a newer one (the file changed in between) takes the newer state
    // rather than reloading, and closing, what a run that started since already uses.
    if (read < this.#appliedRead) return this.#tools(this.#loaded);
    this.#appliedRead = read;
    if (text === undefined) {
      this.#replace(undefined);
      return NO_TOOLS;
    }
    if (this.#loaded?.text !== text) {
      const json = parseFileText(text, this.fileName);
      const config = parseMcpServersConfig(json, { ...(this.#options.env ? { env: this.#options.env } : {}), fileName: this.fileName });
      const toolset = loadMcpTools(config, this.#options.client ?? {}).then((opened) => {
        for (const failure of opened.failures) this.#options.onFailure?.(failure);
        return opened;
      });
      this.#replace({ text, toolset });
    }
    return this.#tools(this.#loaded);
  }

  async #tools(loaded: Loaded | undefined): Promise<LiveMcpTools> {
    if (!loaded) return NO_TOOLS;
    const toolset = await loaded.toolset;
    return { revision: await revisionOf(loaded.text), tools: toolset.tools };
  }

  /** Stops every MCP session of the loaded toolset. */
  async close(): Promise<void> {
    this.#closed = true;
    const loaded = this.#loaded;
    this.#loaded = undefined;
    await closeLoaded(loaded);
  }

  #replace(next: Loaded | undefined): void {
    const previous = this.#loaded;
    this.#loaded = next;
    if (previous && previous !== next) void closeLoaded(previous);
  }
}

async function closeLoaded(loaded: Loaded | undefined): Promise<void> {
  if (!loaded) return;
  await loaded.toolset.then((toolset) => toolset.close(), () => undefined).catch(() => undefined);
}

function parseFileText(text: string | undefined, fileName: string): Record<string, unknown> {
  if (text === undefined || text.trim() === "") return {};
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new DeerflowError("extensions_config_invalid", `${fileName}: not valid JSON (${errorMessage(error)}); fix the file or remove it.`);
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    throw new DeerflowError("extensions_config_invalid", `${fileName}: expected a JSON object at the top level; fix the file or remove it.`);
  }
  return json as Record<string, unknown>;
}

async function revisionOf(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest).slice(0, 12)].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}
