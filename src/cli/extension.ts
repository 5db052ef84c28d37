import { errorMessage } from "../core/errors.ts";
import { ExtensionManager, ExtensionManagerError, validateExtensionSource, type ConfiguredExtension } from "../extensions/manager/index.ts";
import type { ManagerHost } from "../ports/extension-manager.ts";
import type { CliHost } from "./host.ts";

/*
 * `deerflow-edge extension ...`: the operator's surface over the extension manager. Five commands,
 * nothing else; every change ends by saying the gateway must restart, because plugins load only
 * at startup. Exit codes: 0 done, 1 failed, 2 usage error or installation not confirmed, 130
 * interrupted.
 */

export const EXTENSION_USAGE = `deerflow-edge extension: install and manage trusted extensions (the plugins: list of config.yaml)

Usage:
  deerflow-edge extension install SOURCE [--yes] [--required] [--ignore-scripts]
  deerflow-edge extension list [--no-check]
  deerflow-edge extension enable NAME
  deerflow-edge extension disable NAME
  deerflow-edge extension remove NAME

SOURCE is an npm package spec (name, name@1.2.3, @scope/name@^1), an https:// or git+https://
URL, or a local folder (copied into extensions/sources/<package>/ as a snapshot). NAME is a
record's name, its package, or its use value.

Options:
  --config FILE     the config file (default: $DEER_FLOW_CONFIG, else ./config.yaml); extensions/
                    and .deer-flow/ live next to it
  --yes, -y         do not ask: the extension's code runs with the gateway's rights
  --required        make a load failure stop gateway startup (default: skip it with a diagnostic)
  --ignore-scripts  do not run npm install scripts
  --no-check        list without loading each entry
`;

export interface ExtensionCommandOptions {
  /** The file, process and lock port; default: the CLI host's own. */
  readonly managerHost?: ManagerHost;
  /** The config file when the caller already parsed --config; --config in `args` wins. */
  readonly configPath?: string;
  /** How long to wait for another manager operation; default 10 minutes. */
  readonly lockTimeoutMs?: number;
}

const RESTART = "Restart the gateway to apply the change.";
const EXIT_FAILED = 1;
const EXIT_USAGE = 2;
const EXIT_INTERRUPTED = 130;

interface Parsed {
  command: string | undefined;
  positionals: string[];
  flags: Set<string>;
  config: string | undefined;
}

const BOOLEAN_FLAGS: Record<string, string> = {
  "--yes": "yes",
  "-y": "yes",
  "--required": "required",
  "--ignore-scripts": "ignore-scripts",
  "--no-check": "no-check",
  "--help": "help",
  "-h": "help",
};

function parse(args: readonly string[]): Parsed | string {
  const parsed: Parsed = { command: undefined, positionals: [], flags: new Set(), config: undefined };
  let optionsDone = false;
  for (let index = 0; index < args.length; index++) {
    const arg = args[index]!;
    if (!optionsDone && arg === "--") {
      optionsDone = true;
      continue;
    }
    if (!optionsDone && arg.startsWith("-") && arg !== "-") {
      if (arg === "--config" || arg.startsWith("--config=")) {
        const value = arg === "--config" ? args[++index] : arg.slice("--config=".length);
        if (!value) return "--config needs a file";
        parsed.config = value;
        continue;
      }
      const flag = BOOLEAN_FLAGS[arg];
      if (!flag) return `unknown option ${arg}`;
      parsed.flags.add(flag);
      continue;
    }
    if (parsed.command === undefined) parsed.command = arg;
    else parsed.positionals.push(arg);
  }
  return parsed;
}

const ALLOWED_FLAGS: Record<string, readonly string[]> = {
  install: ["yes", "required", "ignore-scripts"],
  list: ["no-check"],
  enable: [],
  disable: [],
  remove: [],
};

function formatList(rows: readonly ConfiguredExtension[]): string {
  const lines = [["NAME", "PACKAGE", "VERSION", "ENABLED", "REQUIRED", "LOADS"].join("\t")];
  for (const row of rows) {
    const loads = row.check === undefined ? "-" : row.check.loads ? "yes" : `no: ${row.check.reason}`;
    lines.push([row.name, row.package ?? "-", row.version ?? "-", row.enabled ? "yes" : "no", row.required ? "yes" : "no", loads].join("\t"));
  }
  return `${lines.join("\n")}\n`;
}

async function confirm(host: CliHost, source: string): Promise<boolean> {
  host.stderr.write(
    "An extension runs its code with the gateway's rights, and so do any install scripts npm allows for it.\n" +
      "Install only sources you trust.\n" +
      `Install ${source}? [y/N] `,
  );
  if (!host.readLine) return false;
  const answer = await host.readLine();
  if (answer === undefined) host.stderr.write("\n");
  return answer !== undefined && /^(?:y|yes)$/i.test(answer.trim());
}

/** Runs `deerflow-edge extension <args>`; returns the exit code. */
export async function extensionCommand(host: CliHost, args: readonly string[], options: ExtensionCommandOptions = {}): Promise<number> {
  const parsed = parse(args);
  if (typeof parsed === "string") {
    host.stderr.write(`error: ${parsed}; run "deerflow-edge extension --help" for the options.\n`);
    return EXIT_USAGE;
  }
  if (parsed.flags.has("help") || parsed.command === undefined || parsed.command === "help") {
    (parsed.command === undefined && !parsed.flags.has("help") ? host.stderr : host.stdout).write(EXTENSION_USAGE);
    return parsed.command === undefined && !parsed.flags.has("help") ? EXIT_USAGE : 0;
  }
  const command = parsed.command;
  const allowed = ALLOWED_FLAGS[command];
  if (!allowed) {
    host.stderr.write(`error: unknown extension command "${command}"; the commands are install, list, enable, disable and remove.\n`);
    return EXIT_USAGE;
  }
  const stray = [...parsed.flags].find((flag) => !allowed.includes(flag));
  if (stray) {
    host.stderr.write(`error: --${stray} does not apply to "extension ${command}".\n`);
    return EXIT_USAGE;
  }
  const wanted = command === "list" ? 0 : 1;
  if (parsed.positionals.length !== wanted) {
    host.stderr.write(`error: "extension ${command}" takes ${wanted === 0 ? "no arguments" : command === "install" ? "one SOURCE" : "one NAME"}.\n`);
    return EXIT_USAGE;
  }
  const argument = parsed.positionals[0] ?? "";

  const managerHost = options.managerHost ?? host.createExtensionManagerHost?.();
  if (!managerHost) {
    host.stderr.write("extension command failed: this runtime's CLI cannot run npm; use the Node, Deno or Bun CLI.\n");
    return EXIT_FAILED;
  }
  const configPath = parsed.config ?? options.configPath ?? host.env.get("DEER_FLOW_CONFIG") ?? "config.yaml";
  const manager = new ExtensionManager({
    host: managerHost,
    configPath,
    moduleLoader: host.createModuleLoader(host.dirname(managerHost.resolvePath(configPath))),
    lockTimeoutMs: options.lockTimeoutMs,
    onLockWait: (holder) => host.stderr.write(`Waiting for another extension-manager operation (${holder}) to finish...\n`),
  });

  try {
    switch (command) {
      case "install": {
        // Refuse a bad remote source before asking anything: the answer would not matter, and
        // the prompt would otherwise repeat a source that may carry a credential.
        if ((await managerHost.lstat(managerHost.resolvePath(argument.trim() || "."))) === undefined || argument.trim() === "") {
          const check = validateExtensionSource(argument);
          if (!check.ok) throw new ExtensionManagerError("extension_source_rejected", `rejected extension source: ${check.message}`);
        }
        const yes = parsed.flags.has("yes") || (await confirm(host, argument.trim()));
        if (!yes) {
          host.stderr.write("Extension installation cancelled (pass --yes to install without asking).\n");
          return EXIT_USAGE;
        }
        const installed = await manager.install(argument, {
          yes,
          required: parsed.flags.has("required"),
          ignoreScripts: parsed.flags.has("ignore-scripts"),
        });
        for (const warning of installed.warnings) host.stderr.write(`warning: ${warning}\n`);
        const version = installed.version ? `@${installed.version}` : "";
        host.stdout.write(
          `${installed.adopted ? "Installed and adopted the existing record for" : "Installed and enabled"} ${installed.name} (${installed.package}${version}), ` +
            `required: ${installed.required ? "yes" : "no"}.\nRestart the gateway to load it.\n`,
        );
        return 0;
      }
      case "list": {
        const rows = await manager.list({ check: !parsed.flags.has("no-check") });
        if (rows.length === 0) host.stdout.write(`No extensions are configured in ${configPath}.\n`);
        else host.stdout.write(formatList(rows));
        return 0;
      }
      case "enable":
      case "disable": {
        const enabled = command === "enable";
        const result = await manager.setEnabled(argument, enabled);
        host.stdout.write(result.changed ? `${enabled ? "Enabled" : "Disabled"} ${result.name}. ${RESTART}\n` : `${result.name} is already ${enabled ? "enabled" : "disabled"}; nothing changed.\n`);
        return 0;
      }
      case "remove": {
        const removed = await manager.remove(argument);
        for (const warning of removed.warnings) host.stderr.write(`warning: ${warning}\n`);
        host.stdout.write(
          removed.packageRemoved
            ? `Removed ${removed.name} and its package ${removed.package}. ${RESTART}\n`
            : `Removed the record ${removed.name}; ${removed.package} stays installed for the other records that use it. ${RESTART}\n`,
        );
        return 0;
      }
    }
  } catch (error) {
    host.stderr.write(`extension command failed: ${errorMessage(error)}\n`);
    if (error instanceof ExtensionManagerError && error.code === "extension_interrupted") return EXIT_INTERRUPTED;
    return EXIT_FAILED;
  }
  return EXIT_FAILED;
}
