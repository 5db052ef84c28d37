import { DeerflowError } from "../../src/core/errors.ts";
import type { SharedStorage } from "../../src/cli/host.ts";
import type { KeyValue } from "../../src/ports/key-value.ts";
import { createMemoryKeyValue } from "../../src/storage/key-value.ts";
import { createFsKeyValue } from "./fs-key-value.ts";

export type KeyValueConfig =
  | { driver: "memory" }
  | { driver: "fs"; base: string }
  | { driver: "deno-kv"; path?: string | undefined }
  | { driver: "postgres"; url_env?: string | undefined };

/** The drivers only some runtimes have: Deno's adapter passes its Deno KV store. */
export interface RuntimeKeyValues {
  readonly denoKv?: (options: { path?: string | undefined }) => KeyValue;
  /**
   * `storage.driver: deno-kv` as one gateway of many isolates (the Deploy entry): the KeyValue, its
   * compare-and-set and the run coordination on one KV handle. Absent (the CLI): a local KV file
   * coordinates no second process, so runs are coordinated in process.
   */
  readonly denoKvShared?: (options: { path?: string | undefined }) => Promise<SharedStorage>;
  /** Checks, before anything starts, that this process may write under an fs store's base (Deno's permissions). */
  readonly assertFsWritable?: (base: string) => void;
}

/** The one sentence `storage.driver: deno-kv` gets where there is no Deno. */
export const DENO_KV_NEEDS_DENO = `storage.driver "deno-kv" needs Deno (deno run --unstable-kv adapters/deno/cli.ts ...); on Node and Bun use "fs" or "memory".`;

/** The one sentence a synchronous open of `storage.driver: postgres` gets: it needs a pool, a migration and a LISTEN connection first. */
export const POSTGRES_NEEDS_OPEN = `storage.driver "postgres" is opened with openPostgresStorage() (adapters/shared/postgres/open.ts), which connects and migrates first; deerflow-edge serve does that for you.`;

/** The KeyValue a config names (postgres aside: see POSTGRES_NEEDS_OPEN). */
export function createKeyValue(config: KeyValueConfig, runtime: RuntimeKeyValues = {}): KeyValue {
  switch (config.driver) {
    case "memory":
      return createMemoryKeyValue();
    case "fs":
      if (typeof config.base !== "string" || config.base === "") {
        throw new StorageConfigError(`The fs storage driver needs a "base" directory, for example { driver: "fs", base: ".deer-flow/storage" }.`);
      }
      runtime.assertFsWritable?.(config.base);
      return createFsKeyValue(config.base);
    case "deno-kv":
      if (!runtime.denoKv) throw new StorageConfigError(DENO_KV_NEEDS_DENO);
      return runtime.denoKv({ path: config.path });
    case "postgres":
      throw new StorageConfigError(POSTGRES_NEEDS_OPEN);
    default: {
      const driver = (config as { driver?: unknown }).driver;
      throw new StorageConfigError(`Unknown storage driver ${JSON.stringify(driver)}. Use "memory", "fs", "postgres" or (on Deno) "deno-kv".`);
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
