/*
 * Which SOURCE strings `deerflow-edge extension install` hands to npm. Everything recorded in the
 * extensions lock must be reproducible by a clean install on another machine (a CI runner, an image
 * build), and nothing secret may end up in the lock, the config or a terminal. So: registry package
 * specs, and remote URLs over HTTPS only (plain HTTP on loopback, for local tooling, with a
 * warning). Local code enters through the directory-snapshot path (checked when it is copied), never
 * through a path, a file: URL or a local tarball here.
 *
 * No message ever contains the source itself: a rejected source may carry a credential, and
 * these messages end up in terminals, CI logs and bug reports.
 */

export type ExtensionSourceKind = "registry" | "url" | "git";

export type ExtensionSourceRejection =
  | "empty"
  | "invalid"
  | "credentials"
  | "secret_query"
  | "scp_shorthand"
  | "hosted_shorthand"
  | "local_path"
  | "file"
  | "ssh"
  | "insecure_transport"
  | "unsupported_scheme";

export type ExtensionSourceCheck =
  | { readonly ok: true; readonly kind: ExtensionSourceKind; readonly warning?: string }
  | { readonly ok: false; readonly category: ExtensionSourceRejection; readonly message: string };

// npm's rules for new package names: lower case, URL-safe, an optional @scope/; no leading dot or
// underscore, so "." and ".." can never be a name.
const PACKAGE_NAME = /^(?:@[a-z0-9-~][a-z0-9-._~]*\/)?[a-z0-9-~][a-z0-9-._~]*$/;
// A version, range or dist-tag: what follows name@ when the package comes from the registry.
const REGISTRY_SPEC = /^[A-Za-z0-9.^~<>=|*+\- ]+$/;
// Git's SCP-like form carries no scheme: user@host:path, with no "//" after the colon.
const SCP_LIKE = /^[^\s/:@]+@[^\s/:@]+:(?!\/)/;
const HOSTED_SCHEMES = new Set(["github", "gitlab", "bitbucket", "gist"]);
const KNOWN_SCHEMES = new Set([...HOSTED_SCHEMES, "file", "link", "http", "https", "ssh", "git", "git+ssh", "git+http", "git+https", "git+file", "npm"]);
const TARBALL_NAME = /\.(?:tgz|tar|tar\.gz)$/i;
const WINDOWS_PATH = /^[A-Za-z]:[\\/]/;
const CONTROL = /[\u0000-\u001f\u007f]/;

// Secret-looking query keys, after splitting camelCase and lower-casing: short generic words only
// as whole words (so "keyword" and "subdirectory" stay installable), distinctive spellings anywhere.
const SECRET_WORD =
  /(?:^|-)(?:api-?key|access-?key|auth|authorization|code|credentials?|key|pass|passwd|password|pw|sas|secret|signature|sig|token|jwt|bearer|session)(?:$|-)/;
const SECRET_SUBSTRING = /access-?token|api-?key|auth-?token|session-?token|credential|password|passwd|signature|secret|private-?token/;

export const NPM_PACKAGE_NAME_MAX = 214;

/** Whether `name` is a valid npm package name (and therefore safe as a folder name below extensions/). */
export function isValidPackageName(name: string): boolean {
  return name.length > 0 && name.length <= NPM_PACKAGE_NAME_MAX && PACKAGE_NAME.test(name);
}

/** Whether a query or fragment key looks like it carries a secret (`token`, `accessToken`, `X-Amz-Signature`). */
export function isSecretQueryKey(key: string): boolean {
  const words = key
    .replace(/([a-z0-9])([A-Z])/g, "$1-$2")
    .replace(/([A-Z])([A-Z][a-z])/g, "$1-$2")
    .replace(/[^A-Za-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .toLowerCase();
  return SECRET_WORD.test(words) || SECRET_SUBSTRING.test(words);
}

/** Whether a URL's host is this machine: localhost, 127.0.0.0/8 or ::1. */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/^\[|\]$/g, "");
  if (host === "localhost" || host.endsWith(".localhost")) return true;
  if (host === "::1" || host === "0:0:0:0:0:0:0:1") return true;
  if (/^::ffff:127\./.test(host)) return true;
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/** Whether `value` is a URL (optionally git+) whose host is loopback. */
export function isLoopbackUrl(value: string): boolean {
  const candidate = value.toLowerCase().startsWith("git+") ? value.slice(4) : value;
  try {
    const url = new URL(candidate);
    return url.hostname !== "" && isLoopbackHost(url.hostname);
  } catch {
    return false;
  }
}

function queryKeys(text: string): string[] {
  const keys: string[] = [];
  for (const part of text.split(/[&;]/)) {
    const raw = part.split("=", 1)[0] ?? "";
    let key = raw;
    try {
      key = decodeURIComponent(raw.replace(/\+/g, " "));
    } catch {
      key = raw;
    }
    if (key !== "") keys.push(key);
  }
  return keys;
}

function hasSecretQuery(candidate: string): boolean {
  const hash = candidate.indexOf("#");
  const beforeHash = hash === -1 ? candidate : candidate.slice(0, hash);
  const question = beforeHash.indexOf("?");
  const query = question === -1 ? "" : beforeHash.slice(question + 1);
  const fragment = hash === -1 ? "" : candidate.slice(hash + 1);
  return [...queryKeys(query), ...queryKeys(fragment)].some(isSecretQueryKey);
}

function stripGit(value: string): string {
  return value.toLowerCase().startsWith("git+") ? value.slice(4) : value;
}

function reject(category: ExtensionSourceRejection, message: string): ExtensionSourceCheck {
  return { ok: false, category, message };
}

const LOCAL_HINT = "to install local code, pass the path of an existing folder: it is copied into extensions/sources/ as a snapshot";

/** `name`, `name@range`, `name@tag`: undefined when `source` is not a registry spec. */
function registrySpec(source: string): boolean | undefined {
  const at = source.indexOf("@", source.startsWith("@") ? 1 : 0);
  const name = at === -1 ? source : source.slice(0, at);
  if (!isValidPackageName(name)) return undefined;
  if (at === -1) return true;
  const spec = source.slice(at + 1);
  if (spec !== "" && REGISTRY_SPEC.test(spec) && spec.trim() === spec) return true;
  return undefined;
}

function checkTarget(target: string, raw: string): ExtensionSourceCheck {
  if (hasSecretQuery(stripGit(target))) {
    return reject(
      "secret_query",
      "the source URL has a query or fragment key that looks like a credential (token, key, signature, ...); extension sources are recorded in the lock and config, so give the registry or host credentials through npm's own configuration (.npmrc), never in the URL",
    );
  }
  const lower = target.toLowerCase();
  const schemeMatch = /^([a-z][a-z0-9+.-]*):/.exec(lower);
  const scheme = schemeMatch?.[1];
  if (scheme !== undefined && HOSTED_SCHEMES.has(scheme)) {
    return reject(
      "hosted_shorthand",
      `the ${scheme}: shorthand makes npm choose the transport (often SSH); name the repository as public Git over HTTPS, for example git+https://github.com/owner/repo.git`,
    );
  }
  // name@file:..., name@https://...: the target's own scheme decides. Otherwise the whole string
  // may be the shorthand, because npm would split git@host:org/repo at its "@" as name@spec.
  const candidates = scheme !== undefined && KNOWN_SCHEMES.has(scheme) ? [target] : [raw, target];
  for (const candidate of candidates) {
    const scp = SCP_LIKE.exec(stripGit(candidate));
    if (scp) {
      const rest = stripGit(candidate).slice(scp[0].length).replace(/[?#].*$/, "");
      const host = scp[0].slice(scp[0].indexOf("@") + 1, -1);
      return reject(
        "scp_shorthand",
        `Git's SSH shorthand (user@host:path) is not installable: extensions come from public Git over HTTPS, for example git+https://${host}/${rest}`,
      );
    }
  }
  if (WINDOWS_PATH.test(target) || target.startsWith(".") || target.startsWith("/") || target.startsWith("~") || target.startsWith("\\")) {
    return reject("local_path", `the source is a path that is not an existing folder; local files and tarballs cannot be reproduced elsewhere, ${LOCAL_HINT}`);
  }
  if (scheme === undefined) {
    if (TARBALL_NAME.test(target)) {
      return reject("local_path", `the source looks like a local tarball; local files cannot be reproduced elsewhere, ${LOCAL_HINT}`);
    }
    if (/^[^@:/\s]+\/[^:/\s]+$/.test(target.replace(/#.*$/, ""))) {
      return reject(
        "hosted_shorthand",
        "npm reads owner/repo as a GitHub shorthand and picks the transport itself; name the repository as public Git over HTTPS (git+https://github.com/owner/repo.git), or pass a folder path starting with ./ to snapshot local code",
      );
    }
    return reject("invalid", "the source is neither a package name (name, name@version, @scope/name@range) nor an https:// or git+https:// URL");
  }
  const base = stripGit(lower).replace(/:.*$/, "");
  if (base === "file") return reject("file", `file: URLs point into this machine and cannot be reproduced elsewhere; ${LOCAL_HINT}`);
  if (base === "ssh" || scheme === "git+ssh") {
    return reject("ssh", "SSH sources need SSH keys on every machine that installs them; use public Git over HTTPS, for example git+https://host/org/repo.git");
  }
  let url: URL;
  try {
    url = new URL(stripGit(target));
  } catch {
    return reject("invalid", "the source URL cannot be parsed; write it as https://host/path or git+https://host/org/repo.git");
  }
  const protocol = url.protocol.replace(/:$/, "");
  if (protocol === "git") {
    return reject("insecure_transport", "the git:// protocol is unauthenticated and unencrypted; use git+https://host/org/repo.git");
  }
  if (protocol !== "http" && protocol !== "https") {
    return reject("unsupported_scheme", "extension sources are package names or https:// / git+https:// URLs; this URL scheme is not supported");
  }
  if (url.username !== "" || url.password !== "") {
    return reject(
      "credentials",
      "the source URL embeds credentials (user:password@host); they would be recorded in the lock and config, so configure them for npm in .npmrc and pass the URL without them",
    );
  }
  if (url.hostname === "") return reject("invalid", "the source URL has no host");
  const kind: ExtensionSourceKind = lower.startsWith("git+") ? "git" : "url";
  if (protocol === "http") {
    if (!isLoopbackHost(url.hostname)) {
      return reject("insecure_transport", "remote extension sources must use HTTPS (plain http:// is accepted only for loopback hosts such as 127.0.0.1)");
    }
    return { ok: true, kind, warning: "the source is a plain-HTTP loopback URL: another machine cannot fetch it, so a clean install elsewhere will not reproduce this extension" };
  }
  if (isLoopbackHost(url.hostname)) {
    return { ok: true, kind, warning: "the source is a loopback URL: another machine cannot fetch it, so a clean install elsewhere will not reproduce this extension" };
  }
  return { ok: true, kind };
}

/**
 * Checks an install SOURCE that is not an existing local folder: a registry package spec
 * (`name`, `name@1.2.3`, `@scope/name@^1`, `alias@npm:name@1`) or a remote URL. Never echoes
 * the source. Local folders are checked when they are snapshotted instead.
 */
export function validateExtensionSource(source: string): ExtensionSourceCheck {
  if (typeof source !== "string" || source.trim() === "") return reject("empty", "give an extension source: a package name, an https:// URL or a local folder");
  if (CONTROL.test(source)) return reject("invalid", "the source contains control characters (a newline or tab, for example); pass it as one plain argument");
  const trimmed = source.trim();
  // npm reads anything ending in .tgz/.tar as a tarball path, even when it is also a valid name.
  if (TARBALL_NAME.test(trimmed) && !/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(trimmed) && !/^[^@/]+@[A-Za-z][A-Za-z0-9+.-]*:/.test(trimmed.replace(/^@[^/]+\//, ""))) {
    return reject("local_path", `the source looks like a local tarball; local files cannot be reproduced elsewhere, ${LOCAL_HINT}`);
  }
  if (registrySpec(trimmed)) return { ok: true, kind: "registry" };
  // alias@npm:name@range, and a bare npm:name@range.
  const npmAlias = /^(?:((?:@[^/@\s]+\/)?[^/@\s]+)@)?npm:(.+)$/.exec(trimmed);
  if (npmAlias) {
    if ((npmAlias[1] === undefined || isValidPackageName(npmAlias[1])) && registrySpec(npmAlias[2]!)) return { ok: true, kind: "registry" };
    return reject("invalid", "an npm: alias must name a registry package, as in alias@npm:name@1.2.3");
  }
  // name@<url>: npm installs the URL under that name; the URL obeys the same rules.
  const at = trimmed.indexOf("@", trimmed.startsWith("@") ? 1 : 0);
  if (at > 0 && isValidPackageName(trimmed.slice(0, at))) {
    const target = trimmed.slice(at + 1);
    if (target === "") return reject("invalid", "nothing follows the @ in the package spec; write name, name@version or name@https://...");
    return checkTarget(target, trimmed);
  }
  return checkTarget(trimmed, trimmed);
}
