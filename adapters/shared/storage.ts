import { DeerflowError } from "../../src/core/errors.ts";
import type { KeyValue } from "../../src/ports/key-value.ts";
import { createMemoryKeyValue } from "../../src/storage/key-value.ts";
import { createFsKeyValue } from "./fs-key-value.ts";

export type KeyValueConfig = { driver: "memory" } | { driver: "fs"; base: string };

/** The KeyValue a config names. */
export function createKeyValue(config: KeyValueConfig): KeyValue {
  switch (config.driver) {
    case "memory":
      return createMemoryKeyValue();
    case "fs":
      if (typeof config.base !== "string" || config.base === "") {
        throw new StorageConfigError(`The fs storage driver needs a "base" directory, for example { driver: "fs", base: ".deer-flow/storage" }.`);
      }
      return createFsKeyValue(config.base);
    default: {
      const driver = (config as { driver?: unknown }).driver;
      throw new StorageConfigError(`Unknown storage driver ${JSON.stringify(driver)}. Use "memory" or "fs".`);
    }
  }
}

export class StorageConfigError extends DeerflowError {
  declare readonly code: "storage_config_invalid";
  constructor(message: string) {
    super("storage_config_invalid", message);
    this.name = "StorageConfigError";
  }
}
