/**
 * Preloaded into the gateway process by bench/soak.ts (node --import, deno run --preload, bun
 * --preload), ahead of the CLI: the opt-in way for the real server process to report its memory.
 * Inert unless SOAK_PROBE_FILE is set. On SIGUSR2 it writes
 * `{"seq":<n>,"rss":<bytes>,"heap_used":<bytes>,"heap_total":<bytes>,"external":<bytes>}` to that
 * file (through a rename, so a reader never sees half a record). No collection is forced: the
 * numbers are what the process holds on its own, as an operator would see them; with
 * SOAK_PROBE_GC=1 (bench/soak.ts --gc, which also passes --expose-gc) a full collection runs first,
 * which tells garbage not yet collected apart from memory something still holds.
 */
import { renameSync, writeFileSync } from "node:fs";
import process from "node:process";

const g = globalThis as any;
const env = (name: string): string | undefined => (g.Deno ? g.Deno.env.get(name) : process.env[name]);
const file = env("SOAK_PROBE_FILE");
const collect = env("SOAK_PROBE_GC") === "1";

if (file) {
  let seq = 0;
  const report = (): void => {
    if (collect && typeof g.gc === "function") g.gc();
    else if (collect && typeof g.Bun?.gc === "function") g.Bun.gc(true);
    const usage = g.Deno ? g.Deno.memoryUsage() : process.memoryUsage();
    const record = { seq: ++seq, rss: usage.rss, heap_used: usage.heapUsed, heap_total: usage.heapTotal, external: usage.external };
    writeFileSync(`${file}.tmp`, JSON.stringify(record));
    renameSync(`${file}.tmp`, file);
  };
  if (g.Deno) g.Deno.addSignalListener("SIGUSR2", report);
  else process.on("SIGUSR2", report);
}
