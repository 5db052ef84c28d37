import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

/*
 * V8 under Node collects only when allocation asks for it: a gateway that went quiet after a burst
 * of runs keeps the garbage of every finished run, and the RSS it grew to, until the next burst
 * (bench/soak.ts: 227 MB at the start, 653 MB 60 s after three bursts of 200 runs, heap 335 MB of
 * which a collection leaves about 60). Node exposes no collection without --expose-gc at startup;
 * setting the flag later exposes `gc` to contexts created afterwards, so one new context fetches
 * it once.
 */

let collect: (() => void) | null | undefined;

/** A full collection now (the ReclaimMemory port); a no-op if this Node refuses the flag. */
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
}
