import type { ExtensionDiagnostic } from "./diagnostics.ts";
import { DeerflowError, errorMessage } from "../core/errors.ts";
import {
  API_VERSION,
  API_VERSION_MARKER,
  acceptedRange,
  isApiVersion,
  isCompatibleVersion,
  requiredHostRange,
  type ExtensionInstall,
} from "../extension-api/index.ts";
import type { ModuleLoader } from "../ports/module-loader.ts";
import type { PluginSpec } from "./config.ts";
import { HostExtensionRegistry, type LoadedExtensions } from "./registry.ts";

/*
 * Loads the `plugins:` list, in list order — the order is part of the contract, because the
 * middleware stack is position-sensitive. Fail-open by default: a broken plugin is skipped with a
 * diagnostic attributed to it and the gateway still starts. `required: true` flips that to
 * fail-closed, for plugins whose absence changes behaviour rather than observability.
 *
 * The declared contract version is read from the install function's `deerflowApi` property (what
 * `extension({ api })` stamps), not from a module-level export: two installs in one module may be
 * written against different contract versions. No marker means "unversioned" and loads.
 */

/** The loader's diagnostics are ExtensionDiagnostics (errors and warnings). */
export type Diagnostic = ExtensionDiagnostic;

export const EXTENSION_REQUIRED_FAILED = "extension_required_failed";

/** A `required: true` plugin could not load; startup must stop. */
export class ExtensionLoadError extends DeerflowError {
  declare readonly code: typeof EXTENSION_REQUIRED_FAILED;
  /** Every diagnostic recorded up to and including this failure. */
  readonly diagnostics: readonly Diagnostic[];

  constructor(plugin: string, use: string, reason: string, diagnostics: readonly Diagnostic[], options?: { cause?: unknown }) {
    super(
      EXTENSION_REQUIRED_FAILED,
      `required extension "${plugin}" (${use}) failed to load: ${reason}. Fix it, or set required: false (or enabled: false) on it in config.yaml's plugins list.`,
      { cause: options?.cause, details: { plugin, use } },
    );
    this.name = "ExtensionLoadError";
    this.diagnostics = Object.freeze([...diagnostics]);
  }
}

export interface LoadExtensionsOptions {
  /** The contract version this host provides; default API_VERSION. Tests pass others. */
  readonly hostApiVersion?: string;
  /** Called for each diagnostic as it is recorded, e.g. to log it. */
  readonly onDiagnostic?: (diagnostic: Diagnostic) => void;
}

export interface LoadExtensionsResult {
  readonly extensions: LoadedExtensions;
  readonly diagnostics: readonly Diagnostic[];
  /** The `use` of every plugin that installed, in order. */
  readonly loaded: readonly string[];
}

/** Split at the last colon; the schema already guaranteed `module:Export`. */
function splitUse(use: string): { specifier: string; exportName: string } {
  const colon = use.lastIndexOf(":");
  return { specifier: use.slice(0, colon), exportName: use.slice(colon + 1) };
}

function describe(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "an object" : `a ${typeof value}`;
}

class PluginFailure extends DeerflowError {
  constructor(
    message: string,
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super("extension_plugin_failed", message, options);
  }
}

async function resolveInstall(spec: PluginSpec, loader: ModuleLoader, hostApiVersion: string): Promise<ExtensionInstall> {
  const { specifier, exportName } = splitUse(spec.use);
  let namespace: Record<string, unknown>;
  try {
    namespace = await loader.load(specifier);
  } catch (error) {
    throw new PluginFailure(`could not resolve extension entry point: ${errorMessage(error)}`, "its module could not be loaded", { cause: error });
  }
  const install = namespace[exportName];
  if (install === undefined) {
    const exported = Object.keys(namespace).filter((key) => typeof namespace[key] === "function");
    throw new PluginFailure(
      `could not resolve extension entry point: module "${specifier}" has no export "${exportName}"` +
        (exported.length > 0 ? ` (its function exports: ${exported.join(", ")})` : ""),
      `it has no export "${exportName}"`,
    );
  }
  if (typeof install !== "function") {
    throw new PluginFailure(
      `extension entry point is ${describe(install)}, not an install function; export (registry, config) => void`,
      "its entry point is not a function",
    );
  }
  let declared: unknown;
  try {
    declared = (install as unknown as Record<string, unknown>)[API_VERSION_MARKER];
  } catch (error) {
    throw new PluginFailure(`could not read the extension-api version marker: ${errorMessage(error)}`, "its version marker could not be read", { cause: error });
  }
  if (declared !== undefined && declared !== null) {
    if (!isApiVersion(declared)) {
      throw new PluginFailure(
        `extension declares an invalid extension-api version marker (${describe(declared)}${typeof declared === "number" ? ` ${declared}` : ""}); ` +
          `expected a dotted numeric string such as "0.1" — stamp it with extension({ api: "0.1" })`,
        "its version marker is invalid",
      );
    }
    if (!isCompatibleVersion(hostApiVersion, declared)) {
      throw new PluginFailure(
        `extension requires extension-api ${declared}, but this host provides ${hostApiVersion}: ` +
          `it loads extensions declaring ${acceptedRange(hostApiVersion)} up to ${hostApiVersion}. ` +
          `Use an extension build for that range, or run a deerflow-edge whose extension-api is ${requiredHostRange(declared)} (and at least ${declared})`,
        `it declares incompatible extension-api ${declared}`,
      );
    }
  }
  return install as ExtensionInstall;
}

/**
 * Resolves, checks and installs every enabled plugin, in list order. Disabled plugins are never
 * imported. Each failure becomes an `error` diagnostic with `source` = the plugin's `use`; a
 * required plugin's failure throws {@link ExtensionLoadError} (code `extension_required_failed`).
 * An install that throws or rejects has everything it registered undone.
 */
export async function loadExtensions(
  plugins: readonly PluginSpec[],
  loader: ModuleLoader,
  options: LoadExtensionsOptions = {},
): Promise<LoadExtensionsResult> {
  const hostApiVersion = options.hostApiVersion ?? API_VERSION;
  const registry = new HostExtensionRegistry();
  const diagnostics: Diagnostic[] = [];
  const loaded: string[] = [];

  for (const spec of plugins) {
    if (!spec.enabled) continue;
    const mark = registry.mark();
    try {
      const install = await resolveInstall(spec, loader, hostApiVersion);
      try {
        // A shallow copy: an extension reassigning its top-level keys cannot change what the
        // operator configured or what a second plugin with the same `use` receives.
        const config = { ...spec.config };
        await registry.attributedTo(spec.use, (view) => install(view, config));
      } catch (error) {
        registry.rollbackTo(mark);
        throw new PluginFailure(`install() failed: ${errorMessage(error)}`, "its install() failed", { cause: error });
      }
      loaded.push(spec.use);
    } catch (error) {
      const failure = error instanceof PluginFailure ? error : new PluginFailure(errorMessage(error), "it failed to load", { cause: error });
      const diagnostic: Diagnostic = Object.freeze({ level: "error", source: spec.use, message: failure.message });
      diagnostics.push(diagnostic);
      options.onDiagnostic?.(diagnostic);
      if (spec.required) {
        throw new ExtensionLoadError(spec.name ?? spec.use, spec.use, `${failure.reason} (${failure.message})`, diagnostics, { cause: failure.cause });
      }
    }
  }

  return Object.freeze({ extensions: registry.build(), diagnostics: Object.freeze(diagnostics), loaded: Object.freeze(loaded) });
}
