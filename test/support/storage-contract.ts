// The KeyValue contract every driver passes: test/portable/storage-contract.test.ts runs it over the
// drivers of every runtime, test/postgres/ over PostgreSQL (Node only: it starts the server).
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { KeyValue } from "../../src/ports/key-value.ts";

const g = globalThis as { Deno?: unknown; Bun?: unknown };
const runtime = g.Deno ? "deno" : g.Bun ? "bun" : "node";

export function storageContract(name: string, make: (dir: string) => KeyValue | Promise<KeyValue>) {
  describe(`KeyValue contract: ${name} (${runtime})`, () => {
    let dir: string;
    let kv: KeyValue;
    beforeEach(async () => {
      dir = await mkdtemp(join(tmpdir(), "deerflow-kv-"));
      kv = await make(dir);
    });
    afterEach(async () => {
      await kv.dispose();
      await rm(dir, { recursive: true, force: true });
    });

    it("sets, gets and removes items of every JSON shape", async () => {
      expect(await kv.getItem("missing")).toBeNull();
      expect(await kv.hasItem("missing")).toBe(false);
      await kv.setItem("s", "text ✓");
      await kv.setItem("n", 42);
      await kv.setItem("b", false);
      await kv.setItem("o", { list: [1, "two", null], nested: { ok: true } });
      expect(await kv.getItem("s")).toBe("text ✓");
      expect(await kv.getItem("n")).toBe(42);
      expect(await kv.getItem("b")).toBe(false);
      expect(await kv.getItem("o")).toEqual({ list: [1, "two", null], nested: { ok: true } });
      expect(await kv.hasItem("o")).toBe(true);
      await kv.removeItem("o");
      expect(await kv.getItem("o")).toBeNull();
      expect(await kv.hasItem("o")).toBe(false);
    });

    it("lists keys, all or under a base", async () => {
      await kv.setItem("threads:t1:meta", { a: 1 });
      await kv.setItem("threads:t2:meta", { a: 2 });
      await kv.setItem("runs:r1", "x");
      expect((await kv.getKeys()).sort()).toEqual(["runs:r1", "threads:t1:meta", "threads:t2:meta"]);
      expect((await kv.getKeys("threads")).sort()).toEqual(["threads:t1:meta", "threads:t2:meta"]);
      await kv.removeItem("threads:t1:meta");
      expect(await kv.getKeys("threads")).toEqual(["threads:t2:meta"]);
    });

    it("overwrites an existing key", async () => {
      await kv.setItem("k", { v: 1 });
      await kv.setItem("k", { v: 2 });
      expect(await kv.getItem("k")).toEqual({ v: 2 });
      expect(await kv.getKeys()).toEqual(["k"]);
    });
  });
}

