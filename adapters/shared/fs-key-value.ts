import { createStorage } from "unstorage";
import fsDriver from "unstorage/drivers/fs";
import type { KeyValue } from "../../src/ports/key-value.ts";

/**
 * A KeyValue on disk under `baseDir` (one file per key, `a:b:c` -> `a/b/c`), the embedded default on
 * Node, Deno and Bun. unstorage's fs driver imports only node:fs and node:path (plus anymatch;
 * chokidar only when watched), which all three runtimes provide. Deno needs --allow-read and
 * --allow-write for baseDir.
 */
export function createFsKeyValue(baseDir: string): KeyValue {
  return createStorage({ driver: fsDriver({ base: baseDir }) });
}
