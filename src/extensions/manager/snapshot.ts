import type { ManagerFileInfo, ManagerHost } from "../../ports/extension-manager.ts";
import { ExtensionManagerError } from "./errors.ts";

/*
 * A local folder is installed as a snapshot copied into extensions/sources/<package>/, never as a
 * link to the operator's working copy: the lock then names a path inside the project, which a clean
 * install elsewhere (an image build, a second machine) can reproduce, and later edits to the
 * working copy change nothing until the operator reinstalls.
 *
 * These checks stop common packaging accidents (a committed .env, a key file, a link out of the
 * tree), not malicious code: the package runs with the gateway's rights anyway, which is why
 * install asks first.
 */

/** Folder and file names never copied into a snapshot: VCS metadata, installed dependencies, caches. */
export const SNAPSHOT_IGNORED_NAMES: ReadonlySet<string> = new Set([
  ".git",
  ".hg",
  ".svn",
  "node_modules",
  ".npm",
  ".pnpm-store",
  ".yarn",
  ".cache",
  ".turbo",
  ".parcel-cache",
  ".vite",
  ".eslintcache",
  ".DS_Store",
]);
const IGNORED_SUFFIXES = [".tsbuildinfo"];

const CREDENTIAL_NAMES: ReadonlySet<string> = new Set([
  ".npmrc",
  ".netrc",
  ".pypirc",
  ".git-credentials",
  "credentials.json",
  "id_rsa",
  "id_dsa",
  "id_ecdsa",
  "id_ed25519",
]);
const CREDENTIAL_SUFFIXES = [".pem", ".key", ".p12", ".pfx"];

export function isIgnoredInSnapshot(name: string): boolean {
  return SNAPSHOT_IGNORED_NAMES.has(name) || IGNORED_SUFFIXES.some((suffix) => name.endsWith(suffix));
}

/** Whether a file name is likely to hold a credential (.env, .env.local, *.pem, id_rsa, .npmrc ...). */
export function isLikelyCredentialFile(name: string): boolean {
  const lower = name.toLowerCase();
  if (lower === ".env" || lower.startsWith(".env.")) return true;
  if (CREDENTIAL_NAMES.has(lower)) return true;
  return CREDENTIAL_SUFFIXES.some((suffix) => lower.endsWith(suffix));
}

/** The copy filter: everything except ignored names (their whole subtree). */
export function includeInSnapshot(relativePath: string, _info: ManagerFileInfo): boolean {
  const name = relativePath.slice(relativePath.lastIndexOf("/") + 1);
  return !isIgnoredInSnapshot(name);
}

function rejected(message: string): ExtensionManagerError {
  return new ExtensionManagerError("extension_snapshot_rejected", message);
}

/**
 * Walks a local source folder as the snapshot copy will, and refuses it when it holds a symbolic
 * link, anything but folders and regular files, or a likely credential file. Runs before anything is
 * copied or installed.
 */
export async function checkSnapshotSource(host: ManagerHost, root: string): Promise<void> {
  const top = await host.lstat(root);
  if (top?.kind === "symlink") throw rejected("the source folder is a symbolic link; pass the real folder so the snapshot holds exactly what you reviewed");
  if (top?.kind !== "directory") throw rejected("the source is not a folder");
  const pending: string[] = [""];
  while (pending.length > 0) {
    const relative = pending.pop()!;
    const folder = relative === "" ? root : `${root}/${relative}`;
    for (const name of (await host.readdir(folder)).sort()) {
      const path = relative === "" ? name : `${relative}/${name}`;
      if (isIgnoredInSnapshot(name)) continue;
      const info = await host.lstat(`${folder}/${name}`);
      if (info === undefined) continue;
      if (info.kind === "symlink") {
        throw rejected(`${path} is a symbolic link; snapshots hold only real folders and files (a link could pull in files from outside the package)`);
      }
      if (info.kind === "other") throw rejected(`${path} is not a regular file or folder (a socket, device or pipe); remove it from the package`);
      if (info.kind === "directory") {
        pending.push(path);
        continue;
      }
      if (isLikelyCredentialFile(name)) {
        throw rejected(`${path} looks like a credential file; move it out of the package folder (or rename it if it holds none) and install again`);
      }
    }
  }
}
