import type { Env } from "../ports/runtime-ports.ts";

/*
 * What an MCP server written through the HTTP API may launch (upstream's defence in depth, in
 * short). extensions_config.json written by hand can still name any command; through the API, a
 * stdio server runs one of an allowlist of package launchers (npx and uvx unless
 * DEER_FLOW_MCP_STDIO_COMMAND_ALLOWLIST says otherwise), by bare name, without the flags that make
 * a launcher evaluate a string and without the environment variables that inject code at start.
 * This narrows what a hijacked administrator session can do; it is not a sandbox (a launcher
 * still runs whatever package it is pointed at).
 */

export const MCP_STDIO_ALLOWLIST_ENV = "DEER_FLOW_MCP_STDIO_COMMAND_ALLOWLIST";
const DEFAULT_ALLOWLIST = ["npx", "uvx"];
const BARE_COMMAND = /^[A-Za-z0-9._-]+$/;

/** Flags that make a launcher or an interpreter run a string as code. */
const EXEC_FLAGS = new Set(["-c", "--call", "-e", "--eval", "--print", "--shell", "--node-arg", "--node-options"]);
/** Variables that run code when a process starts. */
const CODE_INJECTING_ENV = new Set([
  "BASH_ENV",
  "DYLD_INSERT_LIBRARIES",
  "ENV",
  "LD_AUDIT",
  "LD_PRELOAD",
  "NODE_OPTIONS",
  "PERL5OPT",
  "PYTHONHOME",
  "PYTHONPATH",
  "PYTHONSTARTUP",
  "RUBYOPT",
]);

/**
 * How a package launcher's own options end: at `--` or the package name. npx's options that take
 * no value are listed (any other consumes the next token, so an unknown one cannot hide `-c`
 * after it); uvx owns no eval flag, so its value-taking options are listed instead.
 */
const LAUNCHERS: Readonly<Record<string, { exec: ReadonlySet<string>; takesValue: (flag: string) => boolean }>> = {
  npx: {
    exec: EXEC_FLAGS,
    takesValue: (flag) => !new Set(["-y", "--yes", "-q", "--quiet", "-s", "--silent", "--no", "--prefer-offline", "--prefer-online", "--offline", "-d", "--verbose"]).has(flag),
  },
  uvx: {
    exec: new Set([...EXEC_FLAGS].filter((flag) => flag.startsWith("--"))),
    takesValue: (flag) => new Set(["--from", "--with", "--with-editable", "--with-requirements", "--python", "-p", "--index-url", "-i", "--extra-index-url", "--constraints", "-c", "--index", "--directory"]).has(flag),
  },
};

export function allowedStdioCommands(env: Env): string[] {
  const configured = env.get(MCP_STDIO_ALLOWLIST_ENV);
  if (configured === undefined) return DEFAULT_ALLOWLIST;
  return configured.split(",").map((name) => name.trim()).filter(Boolean);
}

function execFlagIn(command: string, args: readonly unknown[]): string | undefined {
  const launcher = LAUNCHERS[command];
  const tokens = args.filter((arg): arg is string => typeof arg === "string").map((arg) => arg.trim());
  if (launcher) {
    for (let index = 0; index < tokens.length; index++) {
      const token = tokens[index]!;
      if (token === "--" || token === "-" || !token.startsWith("-")) return undefined;
      const flag = token.split("=", 1)[0]!;
      const normalized = flag.startsWith("--") ? flag.toLowerCase() : flag;
      if (launcher.exec.has(normalized)) return normalized;
      if (!token.includes("=") && launcher.takesValue(normalized)) index++;
    }
    return undefined;
  }
  // Any other allowlisted command is an interpreter: every argument is screened, `-p` (node's
  // --print) too, and clustered short options (`-pe`) letter by letter.
  for (const token of tokens) {
    const flag = token.split("=", 1)[0]!.toLowerCase();
    if (EXEC_FLAGS.has(flag) || flag === "-p") return flag;
    if (flag.startsWith("-") && !flag.startsWith("--")) {
      const letter = [...flag.slice(1)].find((ch) => ch === "c" || ch === "e" || ch === "p");
      if (letter) return `-${letter}`;
    }
  }
  return undefined;
}

/**
 * Why the API refuses to write this stdio server, as `[key, reason]` (the key under the server),
 * or undefined when it may. Servers of other transports are not checked here.
 */
export function stdioServerRefusal(server: Readonly<Record<string, unknown>>, env: Env): [string, string] | undefined {
  const transport = server["type"] ?? server["transport"] ?? "stdio";
  if (transport !== "stdio") return undefined;
  const command = server["command"];
  if (typeof command !== "string") return undefined;
  const allowed = allowedStdioCommands(env);
  if (!BARE_COMMAND.test(command) || !allowed.includes(command)) {
    return [
      "command",
      `${JSON.stringify(command)} may not be launched through the API; use one of ${allowed.map((name) => JSON.stringify(name)).join(", ") || "(none)"} by bare name (${MCP_STDIO_ALLOWLIST_ENV} extends the list), or write the entry into extensions_config.json by hand`,
    ];
  }
  const args = Array.isArray(server["args"]) ? server["args"] : [];
  const flag = execFlagIn(command, args);
  if (flag) return ["args", `${JSON.stringify(flag)} would make ${command} run arbitrary code; point the server at a package instead`];
  const vars = server["env"];
  if (typeof vars === "object" && vars !== null) {
    const injecting = Object.keys(vars).find((name) => CODE_INJECTING_ENV.has(name.trim().toUpperCase()));
    if (injecting) return [`env.${injecting}`, `${injecting} runs code when the server starts; remove it`];
  }
  return undefined;
}
