import { DeerflowError } from "../core/errors.ts";

/**
 * Loads an ES module by specifier at run time: what config-declared extension middlewares
 * (`extensions.middlewares: ["./audit.ts:AuditMiddleware"]`) need. Resolution is the runtime's
 * business — relative paths against the operator's config directory, package names through the
 * runtime's package resolution — so it lives behind this port and src/ never calls `import()` on a
 * string itself.
 */
export interface ModuleLoader {
  /** The module's namespace object: its exports by name (`default` for a default export). */
  load(specifier: string): Promise<Record<string, unknown>>;
}

export type ModuleLoaderErrorCode = "module_not_found" | "module_load_failed";

/**
 * `module_not_found`: nothing resolves at the specifier, or a package it imports is missing.
 * `module_load_failed`: the module was found but failed while loading (a syntax error, a throw at
 * top level).
 */
export class ModuleLoaderError extends DeerflowError {
  declare readonly code: ModuleLoaderErrorCode;

  constructor(code: ModuleLoaderErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.name = "ModuleLoaderError";
  }
}
