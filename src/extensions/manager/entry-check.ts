import { errorMessage } from "../../core/errors.ts";
import { API_VERSION, API_VERSION_MARKER, isApiVersion, isCompatibleVersion } from "../../extension-api/index.ts";
import type { ModuleLoader } from "../../ports/module-loader.ts";

/*
 * Whether a plugin record's entry loads the way the gateway will load it: through the same
 * ModuleLoader (relative paths against the config folder), the export an install function, and its
 * declared extension-api version one this host accepts. install() itself is not called: it needs
 * the operator's private config and a live registry, and running it here would register into
 * nothing.
 */

export type EntryCheck = { readonly loads: true } | { readonly loads: false; readonly reason: string };

export interface EntryCheckOptions {
  readonly hostApiVersion?: string;
  /** Gives up on a module whose top level never settles. */
  readonly timeoutMs?: number;
}

function splitUse(use: string): { specifier: string; exportName: string } {
  const colon = use.lastIndexOf(":");
  return colon <= 0 ? { specifier: use, exportName: "" } : { specifier: use.slice(0, colon), exportName: use.slice(colon + 1) };
}

export async function checkExtensionEntry(loader: ModuleLoader, use: string, options: EntryCheckOptions = {}): Promise<EntryCheck> {
  const { specifier, exportName } = splitUse(use);
  if (exportName === "") return { loads: false, reason: `"${use}" is not module:Export` };
  const timeoutMs = options.timeoutMs ?? 30_000;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let namespace: Record<string, unknown>;
  try {
    namespace = await Promise.race([
      loader.load(specifier),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`the module did not finish loading within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
  } catch (error) {
    return { loads: false, reason: errorMessage(error).split("\n")[0]! };
  } finally {
    if (timer !== undefined) clearTimeout(timer);
  }
  const install = namespace[exportName];
  if (typeof install !== "function") {
    return { loads: false, reason: install === undefined ? `the module has no export "${exportName}"` : `export "${exportName}" is not an install function` };
  }
  const declared = (install as unknown as Record<string, unknown>)[API_VERSION_MARKER];
  if (declared !== undefined && declared !== null) {
    const host = options.hostApiVersion ?? API_VERSION;
    if (!isApiVersion(declared)) return { loads: false, reason: "its extension-api version marker is not a dotted version string" };
    if (!isCompatibleVersion(host, declared)) return { loads: false, reason: `it requires extension-api ${declared}, this host provides ${host}` };
  }
  return { loads: true };
}
