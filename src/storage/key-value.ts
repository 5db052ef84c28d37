import { createStorage } from "unstorage";
import type { KeyValue } from "../ports/key-value.ts";
import { scopedMemoryDriver } from "./memory-driver.ts";

/** A KeyValue that lives as long as the process: tests, and state nobody needs after a restart. */
export function createMemoryKeyValue(): KeyValue {
  return createStorage({ driver: scopedMemoryDriver() });
}
