import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

/*
 * V8 under Node collects only when allocation asks for it: a gateway that went quiet after a burst
 * of runs keeps the garbage of every finished run, and the RSS it grew to, until the next burst
 * (bench/soak.ts: 227 MB at the start, 653 MB 60 s after three bursts of 200 runs, heap 335 MB of
 * which a collection leaves about 60). Node exposes no collection without --expose-gc at startup;
 * setting the flag later exposes `gc` to contexts created afterwards, so one new context fetches
 * it once. Two passes: the first frees the garbage, the second compacts the pages the survivors
 * left sparse, so the heap's committed size (and the RSS) shrinks too, not only what it uses (one
 * pass: heap 88 of 248 MB committed and RSS 370 MB 20 s after a burst; a burst's survivors are
 * scattered over every page it grew).
 */

let collect: (() => void) | null | undefined;

/** Two full collections now (the ReclaimMemory port); a no-op if this Node refuses the flag. */
export function reclaimNodeMemory(): void {
  if (collect === undefined) {
    try {
      setFlagsFromString("--expose-gc");
      const found: unknown = runInNewContext("typeof gc === 'function' ? gc : undefined");
      collect = typeof found === "function" ? (found as () => void) : null;
    } catch {
      collect = null;
    }
  }
  collect?.();
  collect?.();
}
