// storage.driver deno-kv. On Deno (--unstable-kv): values of any size through the 64 KiB value
// limit and the 800 KiB commit limit, read back from the file by a new store, each replaced
// atomically (a failure injected in the middle of a write leaves the old value whole, a reader
// racing writers sees one whole value or the other), nothing left behind by a replaced or failed
// generation. On Node and Bun: the driver is refused with one sentence.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as v from "valibot";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createDenoKvKeyValue, openDenoKv, type DenoKvAtomic, type DenoKvLike } from "../../adapters/deno/kv-key-value.ts";
import { createKeyValue, DENO_KV_NEEDS_DENO, StorageConfigError } from "../../adapters/shared/storage.ts";
import { StorageConfigSchema } from "../../src/config/index.ts";

const g = globalThis as { Deno?: { openKv?: unknown }; Bun?: unknown };
const runtime = g.Deno ? "deno" : g.Bun ? "bun" : "node";

const MB = 1024 * 1024;
function bytesOf(size: number, seed: number): Uint8Array {
  const out = new Uint8Array(size);
  for (let i = 0; i < size; i++) out[i] = (i * 31 + seed) & 0xff;
  return out;
}
const sameBytes = (a: unknown, b: Uint8Array) => a instanceof Uint8Array && a.length === b.length && a.every((x, i) => x === b[i]);

/** Every raw key of the database, grouped by its key space (k heads, v inline values, c chunks, p markers). */
async function rawSpaces(kv: DenoKvLike): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for await (const entry of kv.list({ prefix: [] })) out[String(entry.key[0])] = (out[String(entry.key[0])] ?? 0) + 1;
  return out;
}

/** A real Deno KV whose commits are counted, and whose commit number `failAt` (1-based) throws. */
function faulty(kv: DenoKvLike, failAt: () => number | undefined): DenoKvLike & { commits: number } {
  const wrapper = {
    commits: 0,
    get: kv.get.bind(kv),
    getMany: kv.getMany.bind(kv),
    list: kv.list.bind(kv),
    close: kv.close.bind(kv),
    atomic(): DenoKvAtomic {
      const inner = kv.atomic();
      const op: DenoKvAtomic = {
        check: (...checks) => (inner.check(...checks), op),
        set: (key, value) => (inner.set(key, value), op),
        delete: (key) => (inner.delete(key), op),
        commit: async () => {
          wrapper.commits++;
          if (wrapper.commits === failAt()) throw new Error("injected: the connection dropped");
          return inner.commit();
        },
      };
      return op;
    },
  };
  return wrapper;
}

if (runtime === "deno") {
  describe("Deno KV storage (deno)", () => {
    let dir: string;
    let path: string;
    beforeEach(async () => {
      dir = await mkdtemp(join(tmpdir(), "deerflow-deno-kv-"));
      path = join(dir, "store.kv");
    });
    afterEach(async () => {
      await rm(dir, { recursive: true, force: true });
    });

    it("stores values of every size past the 64 KiB value and 800 KiB commit limits, and a new store on the file reads them back", async () => {
      const sizes = [0, 1, 65_536, 65_537, 700_000, MB, 3 * MB];
      const kv = createKeyValue({ driver: "deno-kv", path }, { denoKv: createDenoKvKeyValue });
      for (const size of sizes) await kv.setItemRaw(`uploads:t1:${size}`, bytesOf(size, size));
      const text = "Ünïcödé ✓ ".repeat(10_000); // 100,000 characters, 150,000 UTF-8 bytes
      await kv.setItem("threads:t1:message", { content: text });
      await kv.setItem("threads:t1:small", { n: 1 });
      await kv.dispose();

      const again = createDenoKvKeyValue({ path });
      for (const size of sizes) expect(sameBytes(await again.getItemRaw(`uploads:t1:${size}`), bytesOf(size, size)), `${size} bytes`).toBe(true);
      expect(((await again.getItem("threads:t1:message")) as { content: string }).content === text).toBe(true);
      expect(await again.getItem("threads:t1:small")).toEqual({ n: 1 });
      expect((await again.getKeys("uploads")).length).toBe(sizes.length);
      expect((await again.getKeys("threads:t1")).sort()).toEqual(["threads:t1:message", "threads:t1:small"]);
      expect(await again.hasItem("uploads:t1:1048576")).toBe(true);
      // getItems reads five keys a round trip, inline and chunked values alike, absent ones as null.
      const keys = ["threads:t1:small", "missing", "threads:t1:message", ...Array.from({ length: 9 }, (_, n) => `threads:t1:absent-${n}`), "threads:t1:small"];
      const items = await again.getItems(keys);
      expect(items.map((item) => item.key)).toEqual(keys);
      expect(items[0]!.value).toEqual({ n: 1 });
      expect(items[1]!.value).toBeNull();
      expect((items[2]!.value as { content: string }).content === text).toBe(true);
      expect(items.at(-1)!.value).toEqual({ n: 1 });
      await again.dispose();
    });

    it("writes a value too big for one commit in several, each within Deno KV's limits, and drops the generation it replaced", async () => {
      const raw = await openDenoKv(path);
      const counted = faulty(raw, () => undefined);
      const kv = createDenoKvKeyValue({ kv: counted });
      await kv.setItemRaw("blob", bytesOf(3 * MB, 7));
      // 48 chunks of 64 KiB: the real Deno KV refuses any commit past 1000 mutations or 800 KiB,
      // so several commits (marker, chunk batches, head flip) were needed.
      expect(counted.commits).toBeGreaterThanOrEqual(6);
      expect(await rawSpaces(raw)).toEqual({ c: 48, k: 1 });
      await kv.setItemRaw("blob", bytesOf(10, 1));
      expect(await rawSpaces(raw)).toEqual({ k: 1, v: 1 });
      await kv.removeItem("blob");
      expect(await rawSpaces(raw)).toEqual({});
      await kv.dispose();
    });

    for (const [label, size, failAt] of [
      ["a value written in one commit (the commit fails)", 300_000, 1],
      ["a value written in several commits (the third of them fails)", 2 * MB, 3],
      ["a value written in several commits (the head flip fails)", 2 * MB, 5],
    ] as const) {
      it(`${label}: the old value stays whole and nothing of the new one is left`, async () => {
        const raw = await openDenoKv(path);
        let fail: number | undefined;
        const wrapped = faulty(raw, () => fail);
        const kv = createDenoKvKeyValue({ kv: wrapped });
        const old = bytesOf(MB + 5, 3);
        await kv.setItemRaw("uploads:f", old);
        const before = await rawSpaces(raw);
        fail = wrapped.commits + failAt;
        await expect(kv.setItemRaw("uploads:f", bytesOf(size, 9))).rejects.toThrow(/injected/);
        expect(sameBytes(await kv.getItemRaw("uploads:f"), old)).toBe(true);
        expect(await rawSpaces(raw)).toEqual(before);
        await kv.dispose();
      });
    }

    it("sweeps, on the next open, the chunks of a write that died before its head flip", async () => {
      const raw = await openDenoKv(path);
      // The write dies at its flip, and the clean-up after it cannot reach the database either.
      let failFrom = Infinity;
      const dying: DenoKvLike & { commits: number } = faulty(raw, () => (dying.commits >= failFrom ? dying.commits : undefined));
      const kv = createDenoKvKeyValue({ kv: dying });
      await kv.setItem("keep", "old");
      failFrom = dying.commits + 5;
      await expect(kv.setItemRaw("big", bytesOf(2 * MB, 1))).rejects.toThrow(/injected/);
      expect(await rawSpaces(raw)).toMatchObject({ c: 32, p: 1 });
      const reopened = createDenoKvKeyValue({ kv: raw, staleGenerationMs: 0 });
      expect(await reopened.getKeys()).toEqual(["keep"]);
      expect(await rawSpaces(raw)).toEqual({ k: 1, v: 1 });
      await reopened.dispose();
    });

    it("a reader racing writers sees one whole value or the other, never half; concurrent writers leave one value and one generation", async () => {
      const kv = createDenoKvKeyValue({ path });
      const a = bytesOf(MB, 1);
      const b = bytesOf(MB + 1000, 2);
      await kv.setItemRaw("race", a);
      let writing = true;
      const writer = (async () => {
        for (let n = 0; n < 12; n++) await kv.setItemRaw("race", n % 2 ? a : b);
        writing = false;
      })();
      let reads = 0;
      while (writing) {
        const value = await kv.getItemRaw("race");
        expect(sameBytes(value, a) || sameBytes(value, b)).toBe(true);
        reads++;
      }
      await writer;
      expect(reads).toBeGreaterThan(0);

      await Promise.all([a, b, bytesOf(900_000, 3), bytesOf(70_000, 4)].map((value) => kv.setItemRaw("race", value)));
      const final = await kv.getItemRaw("race");
      expect([a, b, bytesOf(900_000, 3), bytesOf(70_000, 4)].some((value) => sameBytes(final, value))).toBe(true);
      const raw = (await kv.getMount("").driver.getInstance!()) as DenoKvLike;
      const spaces = await rawSpaces(raw);
      expect(spaces.p ?? 0).toBe(0);
      expect(spaces.c).toBe(Math.ceil((final as Uint8Array).length / 65_536));
      await kv.dispose();
    });
  });
} else {
  describe(`storage.driver deno-kv on ${runtime}`, () => {
    it("is refused with one sentence saying it needs Deno", () => {
      expect(() => createKeyValue({ driver: "deno-kv", path: "x.kv" })).toThrow(StorageConfigError);
      expect(() => createKeyValue({ driver: "deno-kv" })).toThrow(DENO_KV_NEEDS_DENO);
      expect(() => createDenoKvKeyValue({ path: "x.kv" })).toThrow(DENO_KV_NEEDS_DENO);
      expect(DENO_KV_NEEDS_DENO.split(". ")).toHaveLength(1);
    });
  });
}

describe(`the storage config names deno-kv (${runtime})`, () => {
  it("accepts driver deno-kv with an optional path, and says which drivers there are", () => {
    expect(v.parse(StorageConfigSchema, { driver: "deno-kv", path: "data/deerflow.kv" })).toMatchObject({ driver: "deno-kv", path: "data/deerflow.kv" });
    expect(v.parse(StorageConfigSchema, { driver: "deno-kv" })).toMatchObject({ driver: "deno-kv" });
    const bad = v.safeParse(StorageConfigSchema, { driver: "denokv" });
    expect(bad.success).toBe(false);
    expect(JSON.stringify(bad.issues)).toMatch(/deno-kv/);
    expect(v.safeParse(StorageConfigSchema, { driver: "deno-kv", path: "" }).success).toBe(false);
    expect(v.safeParse(StorageConfigSchema, { driver: "fs", path: "data/deerflow.kv" }).success).toBe(false);
  });
});
