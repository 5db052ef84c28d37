import { normalizePosixPath } from "../../core/path.ts";
import { ExtensionManagerError } from "./errors.ts";
import { isValidPackageName } from "./source.ts";
import { isRecord } from "../../core/guards.ts";

/*
 * The packaging convention: an extension package names its one install function in package.json,
 *
 *     "deerflow": { "extensions": { "audit": "./dist/index.js:install" } }
 *
 * a map with exactly one entry, from the extension's name to `./module/path:exportName` inside the
 * package. A map rather than a single string so that "exactly one" is something a package can get
 * wrong visibly (zero or two entries is refused) instead of something the shape hides. The target
 * is a file path, not a package export, because the manager records it as a path the loader can
 * import from extensions/node_modules on Node, Deno and Bun alike, without resolving the package
 * from wherever deerflow-edge itself is installed.
 */

export const ENTRY_FIELD = "deerflow.extensions";

export interface ExtensionEntry {
  /** The package's own name, from package.json. */
  readonly packageName: string;
  readonly version: string | undefined;
  /** The extension's operator-facing name (the entry's key). */
  readonly name: string;
  /** The module path inside the package, normalised, without a leading "./". */
  readonly modulePath: string;
  readonly exportName: string;
}

const EXPORT_NAME = /^[A-Za-z_$][\w$]*$/;
const CONTROL = /[\u0000-\u001f\u007f]/;
const NAME_MAX = 100;

function invalid(where: string, message: string): ExtensionManagerError {
  return new ExtensionManagerError("extension_package_invalid", `${where}: ${message}`);
}

/** Parses package.json text and reads its one extension entry; `where` names the file in messages. */
export function readExtensionEntry(packageJsonText: string, where: string): ExtensionEntry {
  let manifest: unknown;
  try {
    manifest = JSON.parse(packageJsonText);
  } catch {
    throw invalid(where, "is not valid JSON");
  }
  if (!isRecord(manifest)) throw invalid(where, "must be a JSON object");
  const packageName = manifest["name"];
  if (typeof packageName !== "string" || !isValidPackageName(packageName)) {
    throw invalid(where, 'needs a valid npm package name in "name" (lower case, URL-safe, optionally @scope/name; it also names the snapshot folder)');
  }
  const version = typeof manifest["version"] === "string" ? manifest["version"] : undefined;
  const deerflow = manifest["deerflow"];
  const entries = isRecord(deerflow) ? deerflow["extensions"] : undefined;
  const example = '"deerflow": { "extensions": { "<name>": "./index.js:install" } }';
  if (!isRecord(entries) || Object.keys(entries).length !== 1) {
    const count = isRecord(entries) ? Object.keys(entries).length : 0;
    throw invalid(where, `must declare exactly one extension entry in ${ENTRY_FIELD} (found ${count}), as in ${example}`);
  }
  const [name, target] = Object.entries(entries)[0]!;
  if (name === "" || name !== name.trim() || CONTROL.test(name) || name.length > NAME_MAX) {
    throw invalid(where, `the extension name in ${ENTRY_FIELD} must be 1-${NAME_MAX} characters with no surrounding spaces or control characters`);
  }
  if (typeof target !== "string") throw invalid(where, `the entry "${name}" in ${ENTRY_FIELD} must be a string "./module/path.js:exportName"`);
  const colon = target.lastIndexOf(":");
  const modulePart = colon === -1 ? "" : target.slice(0, colon);
  const exportName = colon === -1 ? "" : target.slice(colon + 1);
  if (!EXPORT_NAME.test(exportName)) {
    throw invalid(where, `the entry "${name}" must end in ":<exportName>" naming the install function, as in ./index.js:install`);
  }
  if (!modulePart.startsWith("./") || modulePart.includes("\\") || /[?#]/.test(modulePart) || CONTROL.test(modulePart)) {
    throw invalid(where, `the entry "${name}" must name a module inside the package with a path starting "./", as in ./dist/index.js:install`);
  }
  const modulePath = normalizePosixPath(modulePart);
  if (modulePath === "." || modulePath === ".." || modulePath.startsWith("../") || modulePath.startsWith("/")) {
    throw invalid(where, `the entry "${name}" points outside its package; name a module file inside it`);
  }
  return { packageName, version, name, modulePath, exportName };
}

/**
 * The `use` of a managed record: a path relative to the config file's folder, where
 * extensions/node_modules/<dependency> holds the installed package.
 */
export function managedUse(dependency: string, entry: Pick<ExtensionEntry, "modulePath" | "exportName">): string {
  return `./extensions/node_modules/${dependency}/${entry.modulePath}:${entry.exportName}`;
}
