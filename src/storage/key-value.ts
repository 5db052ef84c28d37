import { createStorage } from "unstorage";
import memoryDriver from "unstorage/drivers/memory";
import type { KeyValue } from "../ports/key-value.ts";

/** A KeyValue that lives as long as the process: tests, and state nobody needs after a restart. */
export function createMemoryKeyValue(): KeyValue {
  return createStorage({ driver: memoryDriver() });
}
