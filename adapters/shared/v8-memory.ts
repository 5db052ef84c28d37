import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

/*
 * Node and Deno (both V8; node:v8 and node:vm exist on both). V8 under Node collects only when
 * allocation asks for it: a gateway that went quiet after a burst
 * of runs keeps the garbage of every finished run, and the RSS it grew to, until the next burst
 * (bench/soak.ts: 227 MB at the start, 653 MB 60 s after three bursts of 200 runs, heap 335 MB of
 * which a collection leaves about 60). Deno often shrinks on its own, but not always: 60 s after
 * its second burst the heap used 68 of 250 MB committed and RSS stayed at 276 MB (start 183).
 * Neither exposes a collection without --expose-gc at startup;
 * setting the flag later exposes `gc` to contexts created afterwards, so one new context fetches
 * it once.
 *
 * A plain full collection frees the garbage but keeps the heap committed: a burst's survivors (the
 * replay windows, caches) sit scattered over every page it grew, so 20 s after a burst the heap
 * used 88 of 265 MB committed and RSS stayed at 410 MB, even after a second pass. So this one
 * collection compacts every page (--compact-on-every-full-gc for its duration only), and the
 * emptied pages go back to the system. The price: compacting 80 MB of live objects held the event
 * loop 1.2 s on a loaded 2-core machine (a plain collection: 0.27 s), which is why the runs ask only
 * once they have been quiet for a while, and at most every 30 s (src/runtime/runs/reclaim.ts).
 */

let collect: (() => void) | null | undefined;

function flag(value: string): boolean {
  try {
    setFlagsFromString(value);
    return true;
  } catch {
    return false;
  }
}

/** A full, compacting collection now (the ReclaimMemory port); a no-op if this runtime refuses the flag. */
export function reclaimV8Memory(): void {
  if (collect === undefined) {
    try {
      flag("--expose-gc");
      const found: unknown = runInNewContext("typeof gc === 'function' ? gc : undefined");
      collect = typeof found === "function" ? (found as () => void) : null;
    } catch {
      collect = null;
    }
  }
  if (!collect) return;
  const compacting = flag("--compact-on-every-full-gc");
  try {
    collect();
  } finally {
    if (compacting) flag("--no-compact-on-every-full-gc");
  }
}
