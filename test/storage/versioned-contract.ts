// The VersionedKeyValue contract, for every implementation: the in-process one over memory and fs
// (test/storage/versioned.test.ts), PostgreSQL and Deno KV. Only vitest and web APIs here, so the
// same suite runs on Node, Deno and Bun and against any backend.
import { afterAll, describe, expect, it } from "vitest";
import type { VersionedKeyValue } from "../../src/ports/versioned-key-value.ts";
import { updateVersioned } from "../../src/storage/versioned.ts";

export interface VersionedContractOptions {
  /** A second instance over the same backend (another "process"); concurrent writes then go through both. */
  readonly peer?: () => VersionedKeyValue | Promise<VersionedKeyValue>;
  /** Runs once after the suite (close a pool, a KV handle, a temporary folder). */
  readonly cleanup?: () => Promise<void>;
}

export function describeVersionedContract(
  name: string,
  make: () => VersionedKeyValue | Promise<VersionedKeyValue>,
  options: VersionedContractOptions = {},
): void {
  describe(`VersionedKeyValue contract: ${name}`, () => {
    // Keys of their own per test, so a backend shared between tests (a database) needs no clearing.
    const key = (label: string) => `versioned-contract:${crypto.randomUUID()}:${label}`;
    if (options.cleanup) afterAll(options.cleanup);

    it("reads a missing key as no value and no version", async () => {
      const store = await make();
      expect(await store.read(key("missing"))).toEqual({ value: null, version: null });
    });

    it("creates a key only if it is absent", async () => {
      const store = await make();
      const k = key("create");
      expect(await store.write(k, "first", null)).toBe(true);
      expect(await store.write(k, "second", null)).toBe(false);
      const now = await store.read(k);
      expect(now.value).toBe("first");
      expect(now.version).not.toBeNull();
    });

    it("lets exactly one of many concurrent creates win", async () => {
      const store = await make();
      const peer = options.peer ? await options.peer() : store;
      const k = key("race");
      const results = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? peer : store).write(k, `writer-${i}`, null)));
      expect(results.filter(Boolean)).toHaveLength(1);
      expect((await store.read(k)).value).toBe(`writer-${results.indexOf(true)}`);
    });

    it("refuses a write whose expected version is stale, and writes nothing", async () => {
      const store = await make();
      const k = key("stale");
      await store.write(k, "one", null);
      const first = await store.read(k);
      expect(await store.write(k, "two", first.version)).toBe(true);
      expect(await store.write(k, "three", first.version)).toBe(false);
      expect((await store.read(k)).value).toBe("two");
    });

    it("changes the version on every write, even back to an earlier value's neighbour", async () => {
      const store = await make();
      const k = key("versions");
      await store.write(k, "a", null);
      const a = await store.read(k);
      expect(await store.write(k, "b", a.version)).toBe(true);
      const b = await store.read(k);
      expect(b.version).not.toBe(a.version);
      expect(await store.write(k, "a2", a.version)).toBe(false);
    });

    it("keeps text exactly, JSON or not, empty included", async () => {
      const store = await make();
      for (const text of ['{"nested":{"list":[1,"two",null]}}', "plain ✓ text", "", "42"]) {
        const k = key("text");
        expect(await store.write(k, text, null)).toBe(true);
        const read = await store.read(k);
        expect(read.value).toBe(text);
        expect(read.version).not.toBeNull();
      }
    });

    it("deletes only with the current version", async () => {
      const store = await make();
      const k = key("delete");
      await store.write(k, "x", null);
      const x = await store.read(k);
      expect(await store.write(k, null, "not-a-version")).toBe(false);
      expect((await store.read(k)).value).toBe("x");
      expect(await store.write(k, null, x.version)).toBe(true);
      expect(await store.read(k)).toEqual({ value: null, version: null });
      // Gone means absent: a create succeeds again, a write against the old version does not.
      expect(await store.write(k, "y", x.version)).toBe(false);
      expect(await store.write(k, "y", null)).toBe(true);
    });

    it("refuses a create-if-absent after a delete raced it, and an update of a deleted key", async () => {
      const store = await make();
      const k = key("deleted");
      await store.write(k, "x", null);
      const x = await store.read(k);
      expect(await store.write(k, null, x.version)).toBe(true);
      expect(await store.write(k, "late update", x.version)).toBe(false);
      expect((await store.read(k)).value).toBeNull();
    });

    it("loses no change when many read-modify-writes of one key race, retrying on conflict", async () => {
      const store = await make();
      const peer = options.peer ? await options.peer() : store;
      const k = key("counter");
      let conflicts = 0;
      const increment = async (via: VersionedKeyValue, item: number) => {
        for (;;) {
          const { value, version } = await via.read(k);
          const list: number[] = value === null ? [] : (JSON.parse(value) as number[]);
          // Yield between read and write so the racers really interleave.
          await Promise.resolve();
          if (await via.write(k, JSON.stringify([...list, item]), version)) return;
          conflicts++;
        }
      };
      await Promise.all(Array.from({ length: 20 }, (_, i) => increment(i % 2 ? peer : store, i)));
      const final = JSON.parse((await store.read(k)).value ?? "[]") as number[];
      expect([...final].sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i));
      // Twenty racers over one key: some must have lost a round and retried.
      expect(conflicts).toBeGreaterThan(0);
    });

    it("updateVersioned retries a change onto the newest value", async () => {
      const store = await make();
      const peer = options.peer ? await options.peer() : store;
      const k = key("update");
      await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          updateVersioned(i % 2 ? peer : store, k, (current) => {
            const list = current === null ? [] : (JSON.parse(current) as number[]);
            return { value: JSON.stringify([...list, i]), result: undefined };
          }),
        ),
      );
      const final = JSON.parse((await store.read(k)).value ?? "[]") as number[];
      expect(final).toHaveLength(12);
    });
  });
}
