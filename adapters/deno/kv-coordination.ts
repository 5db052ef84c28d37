import { createStorage } from "unstorage";
import type { KeyValue } from "../../src/ports/key-value.ts";
import type { VersionedKeyValue } from "../../src/ports/versioned-key-value.ts";
import { createDenoKvRecords, openDenoKv, type DenoKvWatchable } from "./kv-key-value.ts";
import { DenoKvRunCoordinator } from "./kv-run-coordinator.ts";
import { DenoKvStreamBus } from "./kv-stream-bus.ts";

/*
 * `storage.driver: deno-kv` as one gateway of many isolates (Deno Deploy): the KeyValue, the
 * compare-and-set over its keys, the run coordinator and the stream bus, all on one Kv handle.
 */

export interface DenoKvCoordinationOptions {
  /** A local KV file, a KV Connect URL or ":memory:"; Deno's default database when absent (Deploy's). */
  readonly path?: string | undefined;
  /** An already open KV; `path` is then ignored. */
  readonly kv?: DenoKvWatchable;
  /** This isolate's id as a worker (default: a fresh random one: an isolate has no stable name). */
  readonly workerId?: string;
  readonly leaseMs?: number;
  readonly leaseGraceMs?: number;
}

export interface DenoKvCoordination {
  readonly storage: KeyValue;
  readonly versioned: VersionedKeyValue;
  /** As GatewayOptions.coordination takes it. */
  readonly coordination: { readonly coordinator: DenoKvRunCoordinator; readonly bus: DenoKvStreamBus; readonly workerId: string; readonly leaseGraceMs?: number };
  close(): Promise<void>;
}

export async function openDenoKvCoordination(options: DenoKvCoordinationOptions = {}): Promise<DenoKvCoordination> {
  const kv = options.kv ?? ((await openDenoKv(options.path)) as DenoKvWatchable);
  const records = createDenoKvRecords({ kv });
  const storage = createStorage({ driver: records.driver });
  const coordinator = new DenoKvRunCoordinator({ kv, ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}) });
  const bus = new DenoKvStreamBus({ kv });
  const workerId = options.workerId ?? `deno-${crypto.randomUUID()}`;
  return {
    storage,
    versioned: records.versioned,
    coordination: { coordinator, bus, workerId, ...(options.leaseGraceMs !== undefined ? { leaseGraceMs: options.leaseGraceMs } : {}) },
    async close() {
      await bus.close();
      await coordinator.close();
      // The storage's dispose closes the Kv handle they share.
      await storage.dispose();
    },
  };
}
