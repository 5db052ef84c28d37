import type { ManagerHost, ManagerRunResult } from "../../ports/extension-manager.ts";
import { errorMessage } from "../../core/errors.ts";
import { ExtensionManagerError } from "./errors.ts";

/*
 * How the manager runs npm: always against the extensions folder, always with the flags that make
 * the lock reproducible, and with every environment override that could point npm somewhere else
 * discarded. Flags on the command line already beat environment and .npmrc settings; dropping the
 * overrides as well keeps an override the command line does not mention (a workspace, a target
 * platform, a lockfile switch) from changing what gets recorded.
 */

/**
 * The oldest npm whose behaviour the manager relies on: lockfileVersion 3 written by default, the
 * `install-links` setting honoured the same way by `npm install`, `npm ci` and a project .npmrc
 * (the 9.x line flipped its default), and `npm ci` never rewriting the lock. Node 20.19, the
 * engines floor of this package, ships npm 10.8.
 */
export const NPM_FLOOR = "10.0.0";

/**
 * npm settings (as `npm_config_<name>` in any letter case, `_` or `-`) that are dropped from the
 * environment npm runs with, because they would redirect the project, prefix, lockfile or target
 * or disable TLS verification, on which the HTTPS-only source rule depends.
 */
export const DISCARDED_NPM_SETTINGS: ReadonlySet<string> = new Set([
  // Which project and folder: --prefix is passed explicitly.
  "prefix",
  "global",
  "location",
  "local-prefix",
  "global-prefix",
  "workspace",
  "workspaces",
  "include-workspace-root",
  "workspaces-update",
  // Whether and how the lock and manifest are written.
  "package-lock",
  "package-lock-only",
  "lockfile-version",
  "shrinkwrap",
  "omit-lockfile-registry-resolved",
  "save",
  "save-exact",
  "save-prefix",
  "save-dev",
  "save-optional",
  "save-peer",
  "save-prod",
  "save-bundle",
  "dry-run",
  "force",
  "before",
  // What gets installed, for which platform, in which layout.
  "omit",
  "include",
  "production",
  "only",
  "also",
  "dev",
  "optional",
  "os",
  "cpu",
  "libc",
  "install-links",
  "install-strategy",
  "global-style",
  "legacy-bundling",
  "legacy-peer-deps",
  "strict-peer-deps",
  "link",
  // TLS: a source checked as https:// must be fetched over verified TLS.
  "strict-ssl",
]);

// Everything else stays, on purpose: registry and scoped registries, proxy, https-proxy, noproxy,
// ca, cafile, cert, key, cache, userconfig, globalconfig, auth tokens (`//host/:_authToken`),
// offline and prefer-offline, fetch retries and timeouts, and the install-script policy
// (ignore-scripts, allow-scripts, strict-allow-scripts): how this machine reaches its registry,
// and the operator's own choice of what may run.

/** The npm setting an environment variable sets, or undefined when it sets none. */
export function npmSettingOf(variable: string): string | undefined {
  if (!/^npm_config_/i.test(variable)) return undefined;
  return variable.slice("npm_config_".length).toLowerCase().replace(/_/g, "-");
}

/** The environment npm runs with: everything from `env` except the discarded overrides. */
export function controlledNpmEnv(env: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    const setting = npmSettingOf(name);
    if (setting !== undefined && DISCARDED_NPM_SETTINGS.has(setting)) continue;
    out[name] = value;
  }
  return out;
}

/** The flags every mutating npm call carries: the extensions folder, a written lock, packed folder installs, quiet. */
export function commonNpmFlags(extensionsDir: string): string[] {
  return [
    "--prefix",
    extensionsDir,
    "--package-lock=true",
    "--install-links=true",
    "--strict-ssl=true",
    "--audit=false",
    "--fund=false",
    "--update-notifier=false",
  ];
}

function versionParts(version: string): number[] | undefined {
  const match = /(\d+)\.(\d+)\.(\d+)/.exec(version);
  return match ? [Number(match[1]), Number(match[2]), Number(match[3])] : undefined;
}

/** Whether `version` (e.g. "10.8.2") is at least `floor`. */
export function isAtLeast(version: string, floor: string): boolean {
  const have = versionParts(version);
  const need = versionParts(floor);
  if (!have || !need) return false;
  for (let index = 0; index < 3; index++) {
    if (have[index]! !== need[index]!) return have[index]! > need[index]!;
  }
  return true;
}

/** The tail of npm's output worth showing: its `npm error` lines, else the last lines, without colours. */
export function npmOutputTail(result: Pick<ManagerRunResult, "stdout" | "stderr">): string {
  const text = `${result.stderr}\n${result.stdout}`.replace(/\x1b\[[0-9;]*m/g, "");
  const lines = text.split(/\r?\n/).map((line) => line.trimEnd()).filter((line) => line.trim() !== "");
  const errors = lines.filter((line) => /^npm (?:error|ERR!)/.test(line) && !/A complete log of this run|complete log of this run/.test(line));
  const chosen = (errors.length > 0 ? errors : lines).slice(-8).join("\n");
  return chosen.length > 2_000 ? `…${chosen.slice(-2_000)}` : chosen;
}

/** Runs npm --version and fails before any mutation when it is missing or older than {@link NPM_FLOOR}. */
export async function requireSupportedNpm(host: ManagerHost, cwd: string, env: Record<string, string>, signal?: AbortSignal): Promise<string> {
  let result: ManagerRunResult;
  try {
    result = await host.run("npm", ["--version"], { cwd, env, signal });
  } catch (error) {
    if (signal?.aborted) throw error;
    throw new ExtensionManagerError("extension_npm_unsupported", `npm could not be started (${errorMessage(error)}); install npm ${NPM_FLOOR} or newer and make sure it is on PATH`, { cause: error });
  }
  const version = result.stdout.trim();
  if (result.code !== 0 || !isAtLeast(version, NPM_FLOOR)) {
    throw new ExtensionManagerError(
      "extension_npm_unsupported",
      `the extension manager needs npm ${NPM_FLOOR} or newer, found ${version || "no version"}; upgrade npm (npm install -g npm@latest, or the version pinned in toolchain.json) and run the command again`,
    );
  }
  return version;
}
