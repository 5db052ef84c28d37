// The KeyValue drivers every runtime uses: memory in tests, fs as the embedded default, and on
// Deno (--unstable-kv) Deno KV over a local file (off Deno, test/portable/deno-kv-storage.test.ts
// checks that it is refused).
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createStorage } from "unstorage";
import { storageContract } from "../support/storage-contract.ts";
import { createDenoKvKeyValue } from "../../adapters/deno/kv-key-value.ts";
import { createFsDriver, createFsKeyValue, KNOWN_FOLDERS_MAX, KnownFolders } from "../../adapters/shared/fs-key-value.ts";
import { createKeyValue, StorageConfigError } from "../../adapters/shared/storage.ts";
import type { KeyValue } from "../../src/ports/key-value.ts";
import { createMemoryKeyValue } from "../../src/storage/key-value.ts";

const g = globalThis as { Deno?: unknown; Bun?: unknown };
const runtime = g.Deno ? "deno" : g.Bun ? "bun" : "node";

storageContract("memory", () => createMemoryKeyValue());
storageContract("fs", (dir) => createFsKeyValue(dir));
storageContract("createKeyValue memory", () => createKeyValue({ driver: "memory" }));
storageContract("createKeyValue fs", (dir) => createKeyValue({ driver: "fs", base: dir }));
if (runtime === "deno") {
  storageContract("deno-kv", (dir) => createDenoKvKeyValue({ path: join(dir, "store.kv") }));
  storageContract("createKeyValue deno-kv", (dir) => createKeyValue({ driver: "deno-kv", path: join(dir, "store.kv") }, { denoKv: createDenoKvKeyValue }));
}

describe(`fs KeyValue on disk (${runtime})`, () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "deerflow-kv-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("a value survives a new storage instance on the same directory", async () => {
    const first = createFsKeyValue(dir);
    await first.setItem("threads:t1:meta", { title: "Réport ✓", n: 3 });
    await first.dispose();
    const second = createKeyValue({ driver: "fs", base: dir });
    expect(await second.getItem("threads:t1:meta")).toEqual({ title: "Réport ✓", n: 3 });
    expect(await second.getKeys()).toEqual(["threads:t1:meta"]);
    expect(await readdir(join(dir, "threads", "t1"))).toEqual(["meta"]);
  });

  it("replaces a value whole: concurrent writes leave one of them, a stray temporary file is never a key", async () => {
    const kv = createFsKeyValue(dir);
    const big = (n: number) => ({ n, pad: "x".repeat(200_000) });
    await Promise.all(Array.from({ length: 8 }, (_, n) => kv.setItem("checkpoints:t1:head", big(n))));
    const value = (await kv.getItem("checkpoints:t1:head")) as { n: number; pad: string };
    expect(value.pad).toHaveLength(200_000);
    expect(value.n).toBeGreaterThanOrEqual(0);
    // Nothing but the key's own file is left in the folder.
    expect(await readdir(join(dir, "checkpoints", "t1"))).toEqual(["head"]);
    // What a crash between write and rename would leave behind is not listed as a key.
    await writeFile(join(dir, "checkpoints", "t1", ".head.0123456789abcdef.deerflow-tmp"), "{\"half");
    expect(await kv.getKeys("checkpoints")).toEqual(["checkpoints:t1:head"]);
  });

  it("writes again after its folder was removed behind its back", async () => {
    const kv = createFsKeyValue(dir);
    await kv.setItem("threads:t9:meta", 1);
    await rm(join(dir, "threads"), { recursive: true, force: true });
    await kv.setItem("threads:t9:meta", 2);
    expect(await kv.getItem("threads:t9:meta")).toBe(2);
  });

  it("remembers a bounded number of made folders, however many threads it has written (memory does not grow with every thread)", async () => {
    const known = new KnownFolders(4);
    const kv = createStorage({ driver: createFsDriver(dir, { knownFolders: known }) });
    for (let i = 0; i < 12; i++) await kv.setItem(`threads:t${i}:meta`, i);
    expect(known.size).toBe(4);
    // The most recently written folders are the ones remembered; a forgotten one is made again when needed.
    expect(known.has(join(dir, "threads", "t11"))).toBe(true);
    expect(known.has(join(dir, "threads", "t0"))).toBe(false);
    await rm(join(dir, "threads", "t0"), { recursive: true, force: true });
    await kv.setItem("threads:t0:meta", "again");
    expect(await kv.getItem("threads:t0:meta")).toBe("again");
    expect(known.size).toBe(4);
    expect(new KnownFolders().max).toBe(KNOWN_FOLDERS_MAX);
  });

  it("lists only the keys under the asked base, reading no other subtree", async () => {
    const kv = createFsKeyValue(dir);
    await kv.setItem("checkpoints:t1:c:1", 1);
    await kv.setItem("checkpoints:t1:c:2", 2);
    await kv.setItem("checkpoints:t2:c:1", 3);
    await kv.setItem("sandbox:virtual:u:t1", 4);
    expect((await kv.getKeys("checkpoints:t1")).sort()).toEqual(["checkpoints:t1:c:1", "checkpoints:t1:c:2"]);
    expect((await kv.getKeys("checkpoints")).length).toBe(3);
    expect(await kv.getKeys("missing")).toEqual([]);
    expect((await kv.getKeys()).length).toBe(4);
  });

  it("never wipes other data when asked to clear one base", async () => {
    const kv = createFsKeyValue(dir);
    await kv.setItem("checkpoints:t1:c:1", 1);
    await kv.setItem("sandbox:virtual:u:t1", 2);
    await kv.clear("checkpoints");
    expect(await kv.getItem("sandbox:virtual:u:t1")).toBe(2);
  });

  it("a memory store does not share values between instances", async () => {
    const a = createMemoryKeyValue();
    await a.setItem("k", 1);
    expect(await createMemoryKeyValue().getItem("k")).toBeNull();
  });

  it("refuses keys that climb out of the base directory", async () => {
    const kv = createFsKeyValue(join(dir, "base"));
    await expect(kv.setItem("a:..:..:escaped", "x")).rejects.toThrow(/\.\./);
    expect(await readdir(dir)).toEqual([]);
  });

  it("createKeyValue explains a bad config", () => {
    expect(() => createKeyValue({ driver: "fs", base: "" })).toThrow(StorageConfigError);
    expect(() => createKeyValue({ driver: "redis" } as never)).toThrow(/Unknown storage driver "redis"/);
    // PostgreSQL connects and migrates before it serves: only the async open does that.
    expect(() => createKeyValue({ driver: "postgres", url_env: "DATABASE_URL" })).toThrow(/openPostgresStorage/);
    try {
      createKeyValue({ driver: "redis" } as never);
    } catch (error) {
      expect((error as StorageConfigError).code).toBe("storage_config_invalid");
    }
  });
});

describe(`the memory driver's prefix index (${runtime})`, () => {
  it("answers getKeys(base) from the base's subtree only, segment by segment, and forgets removed keys", async () => {
    const { scopedMemoryDriver } = await import("../../src/storage/memory-driver.ts");
    const driver = scopedMemoryDriver();
    const set = (key: string) => driver.setItem!(key, "v", {});
    for (const key of ["checkpoints:t1:c:1", "checkpoints:t1:c:2", "checkpoints:t10:c:1", "sandbox:u:t1", "top"]) await set(key);
    // The driver itself returns only the subtree: unstorage's own filtering no longer sees every key.
    expect((await driver.getKeys("checkpoints:t1:", {})).sort()).toEqual(["checkpoints:t1:c:1", "checkpoints:t1:c:2"]);
    expect((await driver.getKeys("checkpoints:t1", {})).sort()).toEqual(["checkpoints:t1:c:1", "checkpoints:t1:c:2"]);
    expect(await driver.getKeys("nothing:", {})).toEqual([]);
    expect((await driver.getKeys("", {})).length).toBe(5);
    await driver.removeItem!("checkpoints:t1:c:1", {});
    expect(await driver.getKeys("checkpoints:t1:", {})).toEqual(["checkpoints:t1:c:2"]);
    await driver.clear!("checkpoints:", {});
    expect((await driver.getKeys("", {})).sort()).toEqual(["sandbox:u:t1", "top"]);
    expect(await driver.hasItem("checkpoints:t10:c:1", {})).toBe(false);
  });
});
