import type { Storage } from "unstorage";
import { DeerflowError } from "../core/errors.ts";

/** KeyValue is unstorage itself: one tiny driver interface, many drivers (memory, fs, deno-kv, redis). */
export type KeyValue = Storage;

/**
 * A store that cannot be reached right now (a database down or restarting): nothing was written,
 * and the same request may succeed once the store is back. The gateway answers it 503.
 */
export class StorageUnavailableError extends DeerflowError {
  declare readonly code: "storage_unavailable";
  constructor(message: string, options?: { cause?: unknown }) {
    super("storage_unavailable", message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "StorageUnavailableError";
  }
}
