import { ExtensionApiError } from "./errors.ts";

/**
 * The version of this contract. Before 1.0 a minor may break and a patch only adds, so an
 * extension written against 0.1.0 runs on a 0.1.2 host but one written against 0.1.3 may reach for
 * additions this host does not have.
 */
export const API_VERSION = "0.1.2";

const DOTTED_NUMERIC = /^\d+(?:\.\d+)*$/;

/** True for a dotted numeric version string such as "0.1" or "0.1.2". */
export function isApiVersion(value: unknown): value is string {
  return typeof value === "string" && DOTTED_NUMERIC.test(value);
}

/** The numeric parts of a version, or null when it is not a dotted numeric string. */
export function parseApiVersion(value: unknown): number[] | null {
  if (!isApiVersion(value)) return null;
  const parts = value.split(".").map(Number);
  return parts.every(Number.isSafeInteger) ? parts : null;
}

function padded(a: readonly number[], b: readonly number[]): [number[], number[]] {
  // At least two parts: "0.1" must mean 0.1.x, and a bare "1" must mean 1.0.
  const width = Math.max(a.length, b.length, 2);
  const pad = (parts: readonly number[]) => [...parts, ...new Array<number>(width - parts.length).fill(0)];
  return [pad(a), pad(b)];
}

function compare(a: readonly number[], b: readonly number[]): number {
  for (let index = 0; index < a.length; index += 1) {
    const difference = (a[index] ?? 0) - (b[index] ?? 0);
    if (difference !== 0) return difference;
  }
  return 0;
}

/**
 * Whether a host providing `host` can load an extension declaring `declared`: the majors match,
 * on major 0 the minors match too, and the host is at least the declared version (a newer
 * extension would call contract additions this host lacks). Unparseable versions are refused,
 * never waved through.
 */
export function isCompatibleVersion(host: string, declared: string): boolean {
  const hostParts = parseApiVersion(host);
  const declaredParts = parseApiVersion(declared);
  if (hostParts === null || declaredParts === null) return false;
  const [h, d] = padded(hostParts, declaredParts);
  if (h[0] !== d[0]) return false;
  if (h[0] === 0 && h[1] !== d[1]) return false;
  return compare(h, d) >= 0;
}

function windowOf(version: string): string {
  const parts = parseApiVersion(version);
  if (parts === null) {
    throw new ExtensionApiError(
      "invalid_api_version",
      `"${version}" is not an extension-api version; write a dotted numeric version such as "0.1" or "0.1.2"`,
    );
  }
  const [major = 0, minor = 0] = parts;
  return major === 0 ? `>=0.${minor}.0 <0.${minor + 1}.0` : `>=${major}.0.0 <${major + 1}.0.0`;
}

/**
 * The npm-style window of declared versions a host accepts (`>=0.1.0 <0.2.0` for 0.1.2). Within
 * the window a declaration must also be no newer than the host itself; refusal messages say so.
 */
export function acceptedRange(host: string): string {
  return windowOf(host);
}

/** The npm-style window of host versions that can load an extension declaring `declared`. */
export function requiredHostRange(declared: string): string {
  return windowOf(declared);
}
