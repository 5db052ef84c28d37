// The in-process VersionedKeyValue over the memory and fs KeyValues. Two instances over one fs
// folder (two processes) are not expected to coordinate: each has its own per-key lock; a
// deployment of several processes uses PostgreSQL or Deno KV, whose stores run this same contract.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createFsKeyValue } from "../../adapters/shared/fs-key-value.ts";
import { createMemoryKeyValue } from "../../src/storage/key-value.ts";
import { KeyValueVersioned, updateVersioned, versionedOver, VersionedConflictError } from "../../src/storage/versioned.ts";
import { describeVersionedContract } from "./versioned-contract.ts";

const memory = createMemoryKeyValue();
describeVersionedContract("in-process over memory", () => versionedOver(memory), { peer: () => versionedOver(memory) });

const dir = await mkdtemp(join(tmpdir(), "deerflow-versioned-"));
const fs = createFsKeyValue(dir);
describeVersionedContract("in-process over fs", () => versionedOver(fs), {
  peer: () => versionedOver(fs),
  cleanup: () => rm(dir, { recursive: true, force: true }),
});

describe("KeyValueVersioned", () => {
  it("is one instance per KeyValue, so every consumer of a store shares its locks", () => {
    const kv = createMemoryKeyValue();
    expect(versionedOver(kv)).toBe(versionedOver(kv));
    expect(versionedOver(kv)).not.toBe(versionedOver(createMemoryKeyValue()));
  });

  it("reads what KeyValue wrote and writes what KeyValue reads", async () => {
    const kv = createMemoryKeyValue();
    const versioned = new KeyValueVersioned(kv);
    await kv.setItem("k", { a: 1 });
    const read = await versioned.read("k");
    expect(JSON.parse(read.value!)).toEqual({ a: 1 });
    expect(await versioned.write("k", JSON.stringify({ a: 2 }), read.version)).toBe(true);
    expect(await kv.getItem("k")).toEqual({ a: 2 });
  });

  it("sees a write that bypassed it as a new version", async () => {
    const kv = createMemoryKeyValue();
    const versioned = new KeyValueVersioned(kv);
    await versioned.write("k", "1", null);
    const before = await versioned.read("k");
    await kv.setItem("k", "2");
    expect(await versioned.write("k", "3", before.version)).toBe(false);
  });

  it("gives up with a clear error when a record changes under every attempt", async () => {
    const versioned = new KeyValueVersioned(createMemoryKeyValue());
    let n = 0;
    const noisy = {
      read: (key: string) => versioned.read(key),
      write: async (key: string, value: string | null) => {
        await versioned.write(key, String(n++), (await versioned.read(key)).version);
        return versioned.write(key, value, "stale");
      },
    };
    await expect(updateVersioned(noisy, "k", () => ({ value: "x", result: 1 }))).rejects.toBeInstanceOf(VersionedConflictError);
  });
});
