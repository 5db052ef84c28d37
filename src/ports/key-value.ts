import type { Storage } from "unstorage";

/** KeyValue is unstorage itself: one tiny driver interface, many drivers (memory, fs, deno-kv, redis). */
export type KeyValue = Storage;
