import { parseLeadConfigText, validateLeadConfig, type LeadConfig } from "../agents/app-config.ts";
import { loadReplayRecordings } from "../config/load.ts";
import { DeerflowError, errorMessage } from "../core/errors.ts";
import type { CliHost } from "./host.ts";
import { runCommand } from "./run.ts";
import { serveCommand } from "./serve.ts";
import { extensionCommand } from "./extension.ts";
import { hashPassword } from "../gateway/auth/password.ts";

export const DEMO_TASK =
  "Write a short project note about deerflow-edge (a TypeScript agent harness that runs on Node, Deno and Bun) to the workspace, then check how long it is.";

export const USAGE = `deerflow-edge: DeerFlow's agent harness on Web-standard runtimes

Usage:
  deerflow-edge serve [--host HOST] [--port PORT] [--config FILE]
                                                        serve the LangGraph Platform API (default 127.0.0.1:2026)
  deerflow-edge run "<prompt>" [--model NAME] [--thread ID] [--config FILE]
  deerflow-edge demo [--model NAME] [--config FILE]     run the built-in demo task
  deerflow-edge hash-password                           hash a gateway user's password (read from stdin) for config.yaml
  deerflow-edge extension install|list|enable|disable|remove ...
                                                        manage extensions (see "deerflow-edge extension --help")
  deerflow-edge help

Options:
  --model NAME    a model from config.yaml's models: list, or "demo" (default: default_model, else demo)
  --thread ID     continue an earlier conversation (default: a new thread)
  --config FILE   the config file (default: $DEER_FLOW_CONFIG, else ./config.yaml, else embedded defaults)
  --subagents     let the agent delegate to subagents through the task tool
  --host HOST     where serve listens (default: gateway.host, else 127.0.0.1; any other address needs gateway.auth)
  --port PORT     where serve listens (default: gateway.port, else 2026; 0 picks a free port)
`;

interface ParsedArgs {
  command: string | undefined;
  positionals: string[];
  flags: Map<string, string>;
}

const VALUE_FLAGS = new Set(["--model", "--thread", "--config", "--host", "--port"]);
const BOOLEAN_FLAGS = new Set(["--subagents"]);

function parseArgs(argv: readonly string[]): ParsedArgs {
  const positionals: string[] = [];
  const flags = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "-h" || arg === "--help") {
      flags.set("--help", "true");
      continue;
    }
    if (arg.startsWith("--")) {
      const eq = arg.indexOf("=");
      const name = eq === -1 ? arg : arg.slice(0, eq);
      if (BOOLEAN_FLAGS.has(name) && eq === -1) {
        flags.set(name, "true");
        continue;
      }
      if (!VALUE_FLAGS.has(name)) throw new DeerflowError("usage", `Unknown option ${name}; run "deerflow-edge help" for the options.`);
      const value = eq === -1 ? argv[++i] : arg.slice(eq + 1);
      if (value === undefined || value === "") throw new DeerflowError("usage", `Option ${name} needs a value.`);
      flags.set(name, value);
      continue;
    }
    positionals.push(arg);
  }
  return { command: positionals.shift(), positionals, flags };
}

/**
 * --config FILE, else $DEER_FLOW_CONFIG, else ./config.yaml when present, else the embedded
 * defaults. The fixtures of replay models are read here too, relative to the config's folder.
 */
export async function loadCliConfig(host: CliHost, explicit: string | undefined): Promise<{ config: LeadConfig; source: string; dir: string }> {
  const named = explicit ?? host.env.get("DEER_FLOW_CONFIG");
  if (named) {
    const text = await host.readFile(named);
    if (text === undefined) {
      throw new DeerflowError("config_not_found", `Config file ${named} does not exist; create it or leave out --config to use the embedded defaults.`);
    }
    const dir = host.dirname(named);
    const config = await loadReplayRecordings(parseLeadConfigText(text, named), { readText: (path) => host.readFile(path), baseDir: dir }, named);
    return { config, source: `config ${named}`, dir };
  }
  const local = await host.readFile("config.yaml");
  if (local !== undefined) {
    const config = await loadReplayRecordings(parseLeadConfigText(local, "config.yaml"), { readText: (path) => host.readFile(path), baseDir: "." }, "config.yaml");
    return { config, source: "config config.yaml", dir: "." };
  }
  return { config: validateLeadConfig({}, "(embedded defaults)"), source: "embedded defaults", dir: "." };
}

/** The whole CLI; returns the process exit code. */
export async function main(host: CliHost): Promise<number> {
  // The extension manager has flags of its own (--yes, --required ...); it parses its arguments itself.
  if (host.argv[0] === "extension") return extensionCommand(host, host.argv.slice(1));
  let args: ParsedArgs;
  try {
    args = parseArgs(host.argv);
  } catch (error) {
    host.stderr.write(`error: ${errorMessage(error)}\n`);
    return 2;
  }
  if (!args.command || args.command === "help" || args.flags.has("--help")) {
    (args.command && args.command !== "help" ? host.stdout : host.stdout).write(USAGE);
    return args.command || args.flags.has("--help") ? 0 : 2;
  }
  try {
    switch (args.command) {
      case "run":
      case "demo": {
        const prompt = args.command === "demo" ? DEMO_TASK : args.positionals.join(" ").trim();
        if (!prompt) {
          host.stderr.write(`error: run needs a prompt, for example: deerflow-edge run "Summarise README.md"\n`);
          return 2;
        }
        const { config, source, dir } = await loadCliConfig(host, args.flags.get("--config"));
        return await runCommand(host, {
          prompt,
          config,
          configSource: source,
          configDir: dir,
          model: args.flags.get("--model"),
          threadId: args.flags.get("--thread"),
          subagentsEnabled: args.flags.has("--subagents"),
        });
      }
      case "serve": {
        const { config, source, dir } = await loadCliConfig(host, args.flags.get("--config"));
        const rawPort = args.flags.get("--port");
        const port = rawPort === undefined ? undefined : Number(rawPort);
        if (port !== undefined && !(Number.isInteger(port) && port >= 0 && port <= 65535)) {
          host.stderr.write(`error: --port must be a whole number from 0 to 65535, got "${rawPort}".\n`);
          return 2;
        }
        return await serveCommand(host, { config, configSource: source, configDir: dir, host: args.flags.get("--host"), port });
      }
      case "hash-password": {
        const password = (await host.readLine?.()) ?? "";
        if (password.length < 8) {
          host.stderr.write("error: pipe the password in on stdin (at least 8 characters), for example: printf %s 'secret…' | deerflow-edge hash-password\n");
          return 2;
        }
        host.stdout.write(`${await hashPassword(password)}\n`);
        return 0;
      }
      default:
        host.stderr.write(`error: unknown command "${args.command}"; run "deerflow-edge help" for the commands.\n`);
        return 2;
    }
  } catch (error) {
    host.stderr.write(`error: ${errorMessage(error).split("\n")[0]}\n`);
    return 1;
  }
}
