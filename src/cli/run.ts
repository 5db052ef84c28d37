import { AIMessage, AIMessageChunk, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { loadConfiguredMiddlewareSources } from "../agents/configured-middlewares.ts";
import { EXTENSION_TASK_STORE_KEY, ExtensionData, taskInfo, type TaskInfo, type TaskOutcome } from "../extension-api/index.ts";
import type { ExtensionDiagnostic } from "../extensions/diagnostics.ts";
import { loadExtensions } from "../extensions/loader.ts";
import { bindExtensionSnapshot } from "../extensions/run-context.ts";
import { notifyTaskStart, notifyTaskStop, type NotifyOptions } from "../extensions/notify.ts";
import { EMPTY_EXTENSIONS, type LoadedExtensions } from "../extensions/registry.ts";
import { assembleLeadAgent, LEAD_AGENT_NAME } from "../agents/lead-agent.ts";
import { extensionsFileMiddlewares, type LeadConfig } from "../agents/app-config.ts";
import type { AgentMiddleware } from "../engine/types.ts";
import type { ModuleLoader } from "../ports/module-loader.ts";
import { DeerflowError, errorMessage } from "../core/errors.ts";
import { newId } from "../core/ids.ts";
import { DEFAULT_USER_ID } from "../engine/run-identity.ts";
import { oneLine, textOf } from "../models/text.ts";
import { KeyValueCheckpointSaver } from "../runtime/kv-checkpointer.ts";
import type { CliHost, CliOutput } from "./host.ts";
import { EXTENSIONS_CONFIG_FILE_NAME, LiveMcpConfig } from "../mcp/index.ts";

export interface RunCommandOptions {
  readonly prompt: string;
  readonly model?: string;
  readonly threadId?: string;
  readonly config: LeadConfig;
  /** Where the config came from, for the header line. */
  readonly configSource: string;
  /** The config file's folder: extension module paths resolve against it. */
  readonly configDir: string;
  /** Bind the task tool so the agent can delegate to subagents. */
  readonly subagentsEnabled?: boolean;
}

const SPINNER = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/** A one-line spinner on a terminal; nothing at all when output is piped. */
class Spinner {
  #timer: ReturnType<typeof setInterval> | undefined;
  #frame = 0;
  constructor(private readonly out: CliOutput) {}

  start(label: string): void {
    if (!this.out.isTTY || this.#timer) return;
    const draw = () => this.out.write(`\r\x1b[2K\x1b[2m${SPINNER[this.#frame++ % SPINNER.length]} ${label}\x1b[0m`);
    draw();
    this.#timer = setInterval(draw, 80);
  }

  stop(): void {
    if (!this.#timer) return;
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.out.write("\r\x1b[2K");
  }
}

function describeCall(name: string, args: Record<string, unknown>): string {
  const shown = Object.entries(args)
    .filter(([key]) => key !== "content" && key !== "description")
    .map(([key, value]) => `${key}: ${oneLine(typeof value === "string" ? value : JSON.stringify(value), 60)}`)
    .join(", ");
  return `${name}(${shown})`;
}

/** The messages a node's update wrote, whatever shape the update took (object or channel tuples). */
function updateMessages(update: unknown): BaseMessage[] {
  const out: BaseMessage[] = [];
  const visit = (value: unknown) => {
    if (Array.isArray(value)) {
      if (value.length === 2 && value[0] === "messages") return visit(value[1]);
      for (const item of value) visit(item);
      return;
    }
    if (value && typeof value === "object") {
      if (typeof (value as BaseMessage).getType === "function") out.push(value as BaseMessage);
      else if ("messages" in (value as Record<string, unknown>)) visit((value as Record<string, unknown>).messages);
    }
  };
  visit(update);
  return out;
}

/**
 * `deerflow-edge run`: one task through the whole lead chain, streamed to the terminal: tokens as
 * they come, each tool call with a short result, a spinner while waiting, then usage and time.
 */
export async function runCommand(host: CliHost, options: RunCommandOptions): Promise<number> {
  const { stdout } = host;
  const started = host.clock.now();
  const storage = host.createStorage(options.config.storage, { skillsDir: options.config.skills?.path });
  const sandbox = host.createSandboxProvider(options.config, storage);
  const checkpointer = new KeyValueCheckpointSaver({ storage });
  const threadId = options.threadId ?? newId("thread");
  const controller = new AbortController();
  const unregister = host.onInterrupt(() => controller.abort(new DeerflowError("cancelled", "Cancelled by the user.")));
  const spinner = new Spinner(stdout);
  let memoryStore: { close(): Promise<boolean> } | undefined;
  let mcp: LiveMcpConfig | undefined;
  let extensions: LoadedExtensions = EMPTY_EXTENSIONS;
  let lifecycle: { info: TaskInfo; taskStore: ExtensionData; notifyOptions: NotifyOptions } | undefined;
  let outcome: TaskOutcome = "failed";
  const reportDiagnostic = (d: ExtensionDiagnostic) => host.stderr.write(`${d.level}: extension ${d.source}: ${d.message}\n`);
  try {
    // Extension middlewares are trusted operator code named in config; a bad entry stops here, before any run.
    const moduleLoader = host.createModuleLoader(options.configDir);
    mcp = liveMcpConfig(host, options.configDir);
    const configuredMiddlewares = await loadOperatorMiddlewares(options.config, mcp, moduleLoader);
    // A file that fails its schema stops here; an unreachable server is reported and left out.
    const mcpTools = (await mcp.current()).tools;
    // A required plugin that fails stops here; an optional one is reported and left out.
    const loaded = await loadExtensions(options.config.plugins, moduleLoader, { onDiagnostic: reportDiagnostic });
    extensions = loaded.extensions;
    const assembly = await assembleLeadAgent({
      extensions,
      onExtensionDiagnostic: reportDiagnostic,
      configuredMiddlewares,
      subagentsEnabled: options.subagentsEnabled === true,
      extraTools: mcpTools,
      config: options.config,
      model: options.model,
      env: host.env,
      services: { clock: host.clock, sandbox, storage, env: host.env, baseDir: options.config.storage.base },
      checkpointer,
    });
    memoryStore = assembly.memoryStore;
    const modelName = assembly.model.name;
    const isDemo = assembly.model.is_demo;
    const label = isDemo
      ? " (built-in demo model: a scripted offline session, no provider is called)"
      : assembly.model.provider === "replay"
        ? ` (replay model: plays the recorded session ${assembly.model.model}, no provider is called)`
        : "";
    stdout.write(
      `deerflow-edge · model ${modelName}${label}` +
        ` · thread ${threadId}${assembly.agent.tools.some((t) => t.name === "task") ? " · subagents on" : ""} · ${options.configSource}\n\n`,
    );
    stdout.write(`> ${options.prompt}\n\n`);

    let step = 0;
    let midLine = false;
    const waiting = (label: string) => {
      if (stdout.isTTY) spinner.start(label);
      else stdout.write(`… ${label}\n`);
    };
    waiting(`thinking (model step ${++step})`);
    const runMessages: BaseMessage[] = [];
    let failure: string | undefined;
    // This CLI is the run worker: extensions hear that the task started and how it ended.
    const runId = newId("run");
    const info = taskInfo({ taskId: runId, runId, threadId, kind: "lead", agentName: LEAD_AGENT_NAME });
    const taskStore = extensions.needsTaskStore ? new ExtensionData(runId) : undefined;
    const notifyOptions = { clock: host.clock, onDiagnostic: reportDiagnostic };
    if (taskStore) {
      await notifyTaskStart(extensions.taskLifecycle, extensions.appStore, taskStore, info, notifyOptions);
      lifecycle = { info, taskStore, notifyOptions };
    }
    const stream = assembly.agent.stream(
      { messages: [new HumanMessage(options.prompt)] },
      {
        threadId,
        runId,
        streamMode: ["messages", "updates"],
        signal: controller.signal,
        context: {
          thread_id: threadId,
          user_id: DEFAULT_USER_ID,
          ...(taskStore ? { [EXTENSION_TASK_STORE_KEY]: taskStore } : {}),
          ...bindExtensionSnapshot(extensions),
        },
      },
    );
    for await (const item of stream) {
      const [mode, payload] = item as [string, unknown];
      if (mode === "messages") {
        const [chunk] = payload as [BaseMessage, Record<string, unknown>];
        if (AIMessageChunk.isInstance(chunk)) {
          const text = textOf(chunk.content);
          if (text) {
            spinner.stop();
            stdout.write(text);
            midLine = !text.endsWith("\n");
          }
        }
        continue;
      }
      for (const [node, update] of Object.entries(payload as Record<string, unknown>)) {
        for (const message of updateMessages(update)) {
          runMessages.push(message);
          if (AIMessage.isInstance(message) && node === "model") {
            // LLMErrorHandling turns a provider failure into a fallback answer so the run ends
            // cleanly; the run itself has failed, and says so.
            const kwargs = message.additional_kwargs as Record<string, unknown>;
            if (kwargs.deerflow_error_fallback === true) {
              failure = oneLine(String(kwargs.error_detail ?? "") || textOf(message.content), 400);
            }
            spinner.stop();
            if (midLine) stdout.write("\n");
            midLine = false;
            for (const call of message.tool_calls ?? []) stdout.write(`\n  → ${describeCall(call.name, call.args)}\n`);
            if ((message.tool_calls ?? []).length > 0) waiting(`running ${message.tool_calls!.length} tool call(s)`);
          } else if (ToolMessage.isInstance(message)) {
            spinner.stop();
            const failed = message.status === "error";
            stdout.write(`    ${failed ? "✗" : "✓"} ${message.name ?? "tool"}: ${oneLine(textOf(message.content), 100) || "(no output)"}\n`);
          }
        }
        if (node === "tools") waiting(`thinking (model step ${++step})`);
      }
    }
    spinner.stop();
    if (midLine) stdout.write("\n");
    if (failure !== undefined) {
      host.stderr.write(`\nerror: ${failure}\n`);
      return 1;
    }
    outcome = "completed";
    const usage = runMessages.reduce(
      (sum, m) => {
        const u = AIMessage.isInstance(m) ? m.usage_metadata : undefined;
        return u ? { input: sum.input + u.input_tokens, output: sum.output + u.output_tokens, total: sum.total + u.total_tokens } : sum;
      },
      { input: 0, output: 0, total: 0 },
    );
    const seconds = ((host.clock.now() - started) / 1000).toFixed(1);
    stdout.write(`\n✓ done in ${seconds}s · tokens in ${usage.input} / out ${usage.output} / total ${usage.total}${isDemo ? " (estimated by the demo model)" : ""}\n`);
    stdout.write(`  continue this conversation with --thread ${threadId}\n`);
    return 0;
  } catch (error) {
    spinner.stop();
    if (controller.signal.aborted) outcome = "aborted";
    if (controller.signal.aborted) {
      host.stderr.write("\nerror: cancelled by the user.\n");
      return 130;
    }
    host.stderr.write(`\nerror: ${oneLineError(error)}\n`);
    return 1;
  } finally {
    if (lifecycle) {
      await notifyTaskStop(extensions.taskLifecycle, extensions.appStore, lifecycle.taskStore, lifecycle.info, outcome, lifecycle.notifyOptions).catch(() => {});
    }
    unregister();
    // Closing the sandbox provider saves the thread's files to storage for the next run; closing
    // the memory store processes the conversation it queued instead of waiting out its debounce.
    await sandbox.close().catch(() => {});
    await memoryStore?.close().catch(() => false);
    await mcp?.close().catch(() => {});
  }
}

/**
 * extensions_config.json beside the config (or $DEER_FLOW_EXTENSIONS_CONFIG_PATH), read and (where
 * the host can) written through the host's files. A server that cannot be reached is reported and
 * left out; the run goes on with the others.
 */
export function liveMcpConfig(host: Pick<CliHost, "env" | "readFile" | "writeFileAtomic" | "mcpStdio" | "stderr">, configDir: string): LiveMcpConfig {
  const fileName = host.env.get("DEER_FLOW_EXTENSIONS_CONFIG_PATH") ?? `${configDir}/${EXTENSIONS_CONFIG_FILE_NAME}`;
  const write = host.writeFileAtomic?.bind(host);
  return new LiveMcpConfig({
    file: { fileName, read: () => host.readFile(fileName), ...(write ? { write: (text: string) => write(fileName, text) } : {}) },
    env: host.env,
    ...(host.mcpStdio ? { client: { stdio: host.mcpStdio } } : {}),
    onFailure: (failure) => host.stderr.write(`warning: MCP server ${failure.server} left out: ${failure.message}\n`),
  });
}

/**
 * The configured extension middlewares: config.yaml's `extensions.middlewares`, then those
 * extensions_config.json names (spec: "if extensions.middlewares is set in config.yaml or
 * extensions_config.json"). Both are trusted operator files, read once at start: a changed entry
 * takes a restart, and the gateway's MCP routes keep this section but never write it.
 */
export async function loadOperatorMiddlewares(config: LeadConfig, extensionsConfig: LiveMcpConfig, loader: ModuleLoader): Promise<AgentMiddleware[]> {
  const fromFile = extensionsFileMiddlewares(await extensionsConfig.read(), extensionsConfig.fileName);
  return loadConfiguredMiddlewareSources(
    [
      { source: "config.yaml: extensions.middlewares", entries: config.extensions.middlewares },
      { source: `${extensionsConfig.fileName}: extensions.middlewares`, entries: fromFile },
    ],
    loader,
  );
}

function oneLineError(error: unknown): string {
  return errorMessage(error).split("\n")[0]!.trim();
}
