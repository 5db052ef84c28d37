import { isAbsolute, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { ModuleLoaderError, type ModuleLoader } from "../../src/ports/module-loader.ts";

/*
 * The ModuleLoader port on Node (tsx), Deno and Bun: all three resolve node:path/node:url and
 * dynamic import() the same way. Paths become file URLs, so a relative entry means "relative to
 * the operator's config", never "relative to wherever deerflow-edge happens to be installed".
 * TypeScript modules load as-is: Deno and Bun run them natively; Node 20 cannot, so the first
 * `.ts` file Node refuses (ERR_UNKNOWN_FILE_EXTENSION: the built package runs without tsx)
 * registers tsx's loader and is imported again. Plain-JS configs never pay for tsx.
 */

export interface ModuleLoaderOptions {
  /** What `./x.ts` and `../x.js` resolve against: the directory of the config that names them. Default: the working directory. */
  readonly baseDir?: string;
  /** The dynamic import; replaceable so a host can route loading through its own bundler. */
  readonly importModule?: (target: string) => Promise<unknown>;
}

const URL_SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:/;
// Runtime wording for "nothing at this specifier" (Node/Bun: code ERR_MODULE_NOT_FOUND; Deno: the
// same code with "not a dependency" / "Module not found"; Vite's runner: "Failed to load url").
const NOT_FOUND_CODES: ReadonlySet<string> = new Set(["ERR_MODULE_NOT_FOUND", "MODULE_NOT_FOUND", "ERR_UNSUPPORTED_DIR_IMPORT", "ERR_LOAD_URL"]);
const NOT_FOUND_TEXT = /cannot find (?:module|package)|module not found|not a dependency|failed to load url|does not exist/i;
const ANSI = /\x1b\[[0-9;]*m/g;

let typeScriptLoader: Promise<unknown> | undefined;

/** import(), plus a one-time tsx registration when Node refuses a TypeScript file. */
export async function importWithTypeScript(target: string): Promise<unknown> {
  try {
    return await import(/* @vite-ignore */ target);
  } catch (error) {
    const code = typeof error === "object" && error !== null ? (error as { code?: unknown }).code : undefined;
    if (code !== "ERR_UNKNOWN_FILE_EXTENSION" || !/^file:.*\.[cm]?tsx?$/i.test(target)) throw error;
    typeScriptLoader ??= import("tsx/esm/api").then((tsx) => tsx.register());
    await typeScriptLoader;
    // Node keeps the failed import under its URL, so the second try needs a URL of its own.
    return await import(/* @vite-ignore */ `${target}?tsx`);
  }
}

function isRelative(specifier: string): boolean {
  return specifier === "." || specifier === ".." || specifier.startsWith("./") || specifier.startsWith("../");
}

/** What import() receives: a file URL for paths, the specifier itself for packages and URLs. */
export function importTarget(specifier: string, baseDir: string): string {
  if (isRelative(specifier)) return pathToFileURL(resolve(baseDir, specifier)).href;
  // Before the URL check: a Windows path such as C:\x.ts also looks like a scheme.
  if (isAbsolute(specifier)) return pathToFileURL(specifier).href;
  return specifier;
}

function summary(error: unknown): string {
  const message = typeof error === "object" && error !== null && typeof (error as { message?: unknown }).message === "string"
    ? (error as { message: string }).message
    : String(error);
  return message.replace(ANSI, "").split("\n")[0]!.trim().replace(/[.\s]+$/, "");
}

function isNotFound(error: unknown): boolean {
  const code = typeof error === "object" && error !== null ? (error as { code?: unknown }).code : undefined;
  return (typeof code === "string" && NOT_FOUND_CODES.has(code)) || NOT_FOUND_TEXT.test(summary(error));
}

export function createModuleLoader(options: ModuleLoaderOptions = {}): ModuleLoader {
  const baseDir = resolve(options.baseDir ?? ".");
  const importModule = options.importModule ?? importWithTypeScript;
  return {
    async load(specifier: string): Promise<Record<string, unknown>> {
      if (typeof specifier !== "string" || specifier.trim() === "") {
        throw new ModuleLoaderError("module_not_found", "The module specifier is empty: name a file (./middlewares/audit.ts) or a package (@acme/guard).");
      }
      const target = importTarget(specifier, baseDir);
      let namespace: unknown;
      try {
        namespace = await importModule(target);
      } catch (error) {
        const where = target === specifier ? "" : ` (${target})`;
        if (isNotFound(error)) {
          const hint = isRelative(specifier)
            ? `Relative paths resolve against ${baseDir}; check the path and the file extension.`
            : isAbsolute(specifier) || URL_SCHEME.test(specifier)
              ? "Check that the file exists."
              : `Install the package where the app runs (npm install ${specifier}; on Deno, list it in package.json or deno.json), or name a file with ./ or ../.`;
          throw new ModuleLoaderError("module_not_found", `Could not load module "${specifier}"${where}: ${summary(error)}. ${hint}`, { cause: error });
        }
        throw new ModuleLoaderError(
          "module_load_failed",
          `Module "${specifier}"${where} failed while loading: ${summary(error)}. Fix the error in that module (or one it imports).`,
          { cause: error },
        );
      }
      return namespace as Record<string, unknown>;
    },
  };
}
