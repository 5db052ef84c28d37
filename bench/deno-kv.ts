/**
 * deno-kv: time to write and to read one value through the deno-kv KeyValue (a local Deno KV
 * file), for values of 1 KB (inline), 80 KB (chunked, one commit), 1 MB and 5 MB (chunked, several
 * commits and a head flip), against the fs driver on the same machine.
 *
 * Run: npx deno run --allow-read --allow-write --allow-env --unstable-kv bench/deno-kv.ts
 * Env knob: BENCH_SAMPLES (default 21).
 *
 * Output: one JSON line per driver and size on stdout:
 * { bench, driver, bytes, write_ms_median, read_ms_median, samples }; medians over samples, each a
 * whole setItemRaw (an overwrite of the previous sample's value) or getItemRaw.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createDenoKvKeyValue } from "../adapters/deno/kv-key-value.ts";
import { createFsKeyValue } from "../adapters/shared/fs-key-value.ts";
import type { KeyValue } from "../src/ports/key-value.ts";

const samples = Number(process.env.BENCH_SAMPLES ?? 21);
const sizes = [1_000, 80_000, 1_048_576, 5 * 1_048_576];

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function measure(driver: string, kv: KeyValue): Promise<void> {
  for (const bytes of sizes) {
    const writes: number[] = [];
    const reads: number[] = [];
    for (let n = 0; n < samples + 2; n++) {
      const value = new Uint8Array(bytes).fill(n & 0xff);
      let start = performance.now();
      await kv.setItemRaw(`bench:${bytes}`, value);
      const written = performance.now() - start;
      start = performance.now();
      const back = (await kv.getItemRaw(`bench:${bytes}`)) as Uint8Array;
      const read = performance.now() - start;
      if (back.length !== bytes || back[bytes - 1] !== (n & 0xff)) throw new Error(`${driver} read back the wrong value at ${bytes} bytes`);
      if (n >= 2) {
        writes.push(written);
        reads.push(read);
      }
    }
    console.log(JSON.stringify({ bench: "deno-kv", driver, bytes, write_ms_median: +median(writes).toFixed(2), read_ms_median: +median(reads).toFixed(2), samples }));
  }
}

const dir = await mkdtemp(join(tmpdir(), "deerflow-bench-kv-"));
try {
  const kv = createDenoKvKeyValue({ path: join(dir, "bench.kv") });
  await measure("deno-kv", kv);
  await kv.dispose();
  const fs = createFsKeyValue(join(dir, "fs"));
  await measure("fs", fs);
  await fs.dispose();
} finally {
  await rm(dir, { recursive: true, force: true });
}
