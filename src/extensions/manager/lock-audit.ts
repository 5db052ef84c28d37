import { normalizePosixPath } from "../../core/path.ts";
import { isLoopbackUrl } from "./source.ts";
import { isRecord } from "../../core/guards.ts";

/*
 * After every npm add or remove, the new extensions lock is audited before anything is enabled:
 * every reference in it must be one that a clean `npm ci` in extensions/ on another machine (an
 * image build, a colleague's checkout) can reproduce. Source validation alone cannot promise that,
 * because npm's own configuration can turn a plain package name into a local reference (a registry
 * or cache pointing at a folder, a `file:` override in a parent config). So the audit reads what
 * npm actually recorded.
 *
 * Reproducible local references are relative paths to the extensions folder itself and to the
 * managed snapshots below extensions/sources/. Anything else local (an absolute path, a `file:`
 * URL to elsewhere, a relative path climbing out) fails the transaction. A loopback URL is only
 * warned about: it is just as unreachable from another machine, but unlike an environment-driven
 * resolution it is a source the operator typed on purpose.
 */

export interface LockAuditResult {
  /** References a clean install elsewhere could not reproduce; any one fails the transaction. */
  readonly violations: readonly string[];
  /** Loopback URLs: reported, not fatal. */
  readonly warnings: readonly string[];
}

const WINDOWS_ABSOLUTE = /^[A-Za-z]:[\\/]/;
const SCHEME = /^([A-Za-z][A-Za-z0-9+.-]*):/;
const DEPENDENCY_FIELDS = ["dependencies", "optionalDependencies", "devDependencies", "peerDependencies"] as const;

/** Why a local path (relative to the extensions folder) is not reproducible, or undefined when it is. */
function localProblem(path: string): string | undefined {
  const slashed = path.replace(/\\/g, "/");
  if (slashed.startsWith("/") || WINDOWS_ABSOLUTE.test(path)) return "an absolute path";
  const normalized = normalizePosixPath(slashed);
  if (normalized === ".") return undefined;
  if (normalized === ".." || normalized.startsWith("../")) return "a path outside the extensions folder";
  if (normalized === "sources" || !normalized.startsWith("sources/")) return "a local path that is not a managed snapshot under extensions/sources/";
  return undefined;
}

/** Checks one recorded reference; `where` names its lock entry. */
function checkReference(value: string, where: string, violations: string[], warnings: string[]): void {
  const scheme = SCHEME.exec(value)?.[1]?.toLowerCase();
  if (scheme === undefined || WINDOWS_ABSOLUTE.test(value)) {
    const problem = localProblem(value);
    if (problem) violations.push(`${where} resolves to ${problem} (${value})`);
    return;
  }
  if (scheme === "file" || scheme === "git+file" || scheme === "link") {
    const rest = value.slice(value.indexOf(":") + 1);
    // file:///abs and file://host/abs are absolute by construction.
    const problem = rest.startsWith("//") ? "an absolute file: URL" : localProblem(rest);
    if (problem) violations.push(`${where} resolves to ${problem} (${value})`);
    return;
  }
  if (isLoopbackUrl(value)) {
    let host = "a loopback host";
    try {
      host = new URL(value.replace(/^git\+/i, "")).host;
    } catch {
      // keep the generic wording
    }
    warnings.push(`${where} is fetched from ${host}, which another machine cannot reach: a clean install elsewhere will not reproduce it`);
  }
}

function checkSpecs(entry: Record<string, unknown>, where: string, violations: string[], warnings: string[]): void {
  for (const field of DEPENDENCY_FIELDS) {
    const specs = entry[field];
    if (!isRecord(specs)) continue;
    for (const [name, spec] of Object.entries(specs)) {
      if (typeof spec === "string" && /^(?:file|link|git\+file):/i.test(spec)) checkReference(spec, `${where} ${field}.${name}`, violations, warnings);
    }
  }
}

/** Audits package-lock.json text (lockfileVersion 1, 2 or 3). Unparseable text is itself a violation. */
export function auditExtensionsLock(lockText: string): LockAuditResult {
  const violations: string[] = [];
  const warnings: string[] = [];
  let lock: unknown;
  try {
    lock = JSON.parse(lockText);
  } catch {
    return { violations: ["package-lock.json is not valid JSON"], warnings };
  }
  if (!isRecord(lock)) return { violations: ["package-lock.json is not a JSON object"], warnings };

  const packages = lock["packages"];
  if (isRecord(packages)) {
    for (const [location, entry] of Object.entries(packages)) {
      if (!isRecord(entry)) continue;
      const where = location === "" ? "the extensions manifest" : `"${location}"`;
      // A location outside node_modules is a folder npm links or installs from: it must be a snapshot.
      if (location !== "" && !location.split("/").includes("node_modules")) {
        const problem = localProblem(location);
        if (problem) violations.push(`${where} is ${problem}`);
      }
      if (typeof entry["resolved"] === "string") checkReference(entry["resolved"], where, violations, warnings);
      if (location === "") checkSpecs(entry, where, violations, warnings);
    }
  }

  // lockfileVersion 1 (and the v2 mirror): a nested dependencies tree.
  const visit = (tree: unknown, path: string) => {
    if (!isRecord(tree)) return;
    for (const [name, entry] of Object.entries(tree)) {
      if (!isRecord(entry)) continue;
      const where = `"${path}${name}"`;
      if (isRecord(packages) && Object.hasOwn(packages, `node_modules/${path.replace(/ > /g, "/node_modules/")}${name}`)) {
        // Already checked through "packages".
      } else {
        for (const field of ["resolved", "version"] as const) {
          if (typeof entry[field] === "string" && (field === "resolved" || /^(?:file|link|git\+file):/i.test(entry[field] as string))) {
            checkReference(entry[field] as string, where, violations, warnings);
          }
        }
      }
      visit(entry["dependencies"], `${path}${name} > `);
    }
  };
  visit(lock["dependencies"], "");

  return { violations: [...new Set(violations)], warnings: [...new Set(warnings)] };
}
