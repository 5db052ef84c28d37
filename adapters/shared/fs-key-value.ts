import { mkdir, readdir, rename, rm, writeFile } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { createStorage, type Driver } from "unstorage";
import fsDriver from "unstorage/drivers/fs";
import { touchRecent } from "../../src/core/recent-map.ts";
import type { KeyValue } from "../../src/ports/key-value.ts";

/**
 * Folders a driver remembers as made, most recently written first. Every thread adds a handful
 * (its thread, run, journal, checkpoint and sandbox folders), so an unbounded set grew with every
 * thread the server ever saw: about 3 KB of heap per run on Bun's soak (bench/soak.ts), rising
 * burst after burst. Past the bound a folder is only checked again (one `mkdir -p`) on its next write.
 */
export const KNOWN_FOLDERS_MAX = 1024;

/** The folders a driver knows exist: at most `max`, the least recently written forgotten first. */
export class KnownFolders {
  readonly #folders = new Map<string, true>();
  constructor(readonly max: number = KNOWN_FOLDERS_MAX) {}
  has(folder: string): boolean {
    return this.#folders.has(folder);
  }
  /** Remembers `folder` as made (or as just written, if known): the newest entry. */
  add(folder: string): void {
    touchRecent(this.#folders, folder, () => true as const, this.max);
  }
  delete(folder: string): void {
    this.#folders.delete(folder);
  }
  clear(): void {
    this.#folders.clear();
  }
  get size(): number {
    return this.#folders.size;
  }
}

/**
 * A KeyValue on disk under `baseDir` (one file per key, `a:b:c` -> `a/b/c`), the embedded default on
 * Node, Deno and Bun. unstorage's fs driver imports only node:fs and node:path (plus anymatch;
 * chokidar only when watched), which all three runtimes provide. Deno needs --allow-read and
 * --allow-write for baseDir.
 *
 * The stock driver's getKeys ignores the base it is given and walks the whole tree: a checkpoint
 * lookup on one thread read every file of every thread (518 ms at 16k files, 4 ms scoped). It is
 * scoped to the base's subtree here.
 *
 * The stock driver also writes a file in place, so a crash mid-write leaves a truncated
 * checkpoint, and it checks and creates the folder before every write. Here a value is written to
 * a hidden temporary file and renamed over the key's file (a reader sees the old value or the new
 * one, never half of one), and folders known to exist are not checked again (KnownFolders).
 */
export function createFsKeyValue(baseDir: string): KeyValue {
  return createStorage({ driver: createFsDriver(baseDir) });
}

/** The scoped fs driver itself, for mounting a folder into another storage (a read-only skills folder). */
export function createFsDriver(baseDir: string, options: { readOnly?: boolean; knownFolders?: KnownFolders } = {}): Driver {
  const root = resolve(baseDir);
  const stock = fsDriver({ base: root, ...(options.readOnly ? { readOnly: true } : {}) });
  const dirOf = (base: string | undefined): string | undefined => {
    const segments = (base ?? "").split(":").filter(Boolean);
    if (segments.some((s) => s === ".." || s === ".")) return undefined;
    return join(root, ...segments);
  };
  const ensured = options.knownFolders ?? new KnownFolders();
  const fileOf = (key: string): string => {
    const segments = key.split(":").filter(Boolean);
    if (segments.some((s) => s === ".." || s === ".")) {
      throw new Error(`[unstorage] [fs] Invalid key: ${JSON.stringify(key)}. It should not contain .. segments`);
    }
    return join(root, ...segments);
  };
  const write = async (key: string, value: string | Uint8Array, encoding?: "utf8"): Promise<void> => {
    const file = fileOf(key);
    const dir = dirname(file);
    const temporary = join(dir, `.${basename(file)}.${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}${TEMPORARY_SUFFIX}`);
    for (let attempt = 0; ; attempt++) {
      if (!ensured.has(dir)) await mkdir(dir, { recursive: true });
      ensured.add(dir);
      try {
        await writeFile(temporary, value, encoding);
        await rename(temporary, file);
        return;
      } catch (error) {
        await rm(temporary, { force: true }).catch(() => undefined);
        // The folder went away since it was made (a clear, a thread deleted): make it again, once.
        if ((error as { code?: string }).code === "ENOENT" && attempt === 0) {
          ensured.delete(dir);
          continue;
        }
        throw error;
      }
    }
  };
  const driver: Driver = {
    ...stock,
    ...(options.readOnly
      ? {}
      : {
          setItem: (key: string, value: string) => write(key, value, "utf8"),
          setItemRaw: (key: string, value: unknown) => write(key, value as Uint8Array),
          async clear(base: string) {
            ensured.clear();
            return stock.clear?.(base, {});
          },
        }),
    async getKeys(base) {
      const dir = dirOf(base);
      if (dir === undefined) return [];
      const prefix = (base ?? "").split(":").filter(Boolean);
      return (await walk(dir)).map((parts) => [...prefix, ...parts].join(":"));
    },
  };
  return driver;
}

/** A value on its way to its file; never a key. */
const TEMPORARY_SUFFIX = ".deerflow-tmp";

async function walk(dir: string): Promise<string[][]> {
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch (error) {
    if ((error as { code?: string }).code === "ENOENT" || (error as { code?: string }).code === "ENOTDIR") return [];
    throw error;
  }
  const out: string[][] = [];
  await Promise.all(
    entries.map(async (entry) => {
      if (entry.isDirectory()) {
        for (const rest of await walk(join(dir, entry.name))) out.push([entry.name, ...rest]);
      } else if (!entry.name.endsWith(TEMPORARY_SUFFIX)) {
        out.push([entry.name]);
      }
    }),
  );
  return out;
}
