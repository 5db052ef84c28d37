import { readdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import { createStorage, type Driver } from "unstorage";
import fsDriver from "unstorage/drivers/fs";
import type { KeyValue } from "../../src/ports/key-value.ts";

/**
 * A KeyValue on disk under `baseDir` (one file per key, `a:b:c` -> `a/b/c`), the embedded default on
 * Node, Deno and Bun. unstorage's fs driver imports only node:fs and node:path (plus anymatch;
 * chokidar only when watched), which all three runtimes provide. Deno needs --allow-read and
 * --allow-write for baseDir.
 *
 * The stock driver's getKeys ignores the base it is given and walks the whole tree: a checkpoint
 * lookup on one thread read every file of every thread (518 ms at 16k files, 4 ms scoped). It is
 * scoped to the base's subtree here.
 */
export function createFsKeyValue(baseDir: string): KeyValue {
  return createStorage({ driver: createFsDriver(baseDir) });
}

/** The scoped fs driver itself, for mounting a folder into another storage (a read-only skills folder). */
export function createFsDriver(baseDir: string, options: { readOnly?: boolean } = {}): Driver {
  const root = resolve(baseDir);
  const stock = fsDriver({ base: root, ...(options.readOnly ? { readOnly: true } : {}) });
  const dirOf = (base: string | undefined): string | undefined => {
    const segments = (base ?? "").split(":").filter(Boolean);
    if (segments.some((s) => s === ".." || s === ".")) return undefined;
    return join(root, ...segments);
  };
  const driver: Driver = {
    ...stock,
    async getKeys(base) {
      const dir = dirOf(base);
      if (dir === undefined) return [];
      const prefix = (base ?? "").split(":").filter(Boolean);
      return (await walk(dir)).map((parts) => [...prefix, ...parts].join(":"));
    },
  };
  return driver;
}

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
      } else {
        out.push([entry.name]);
      }
    }),
  );
  return out;
}
