/*
 * Bun's collector also lets a quiet gateway keep a burst's garbage for a while: 60 s after the
 * last of a burst of 200 runs the heap still used 62 MB (start: 24), and a synchronous full
 * collection then took RSS from 290 to 241 MB, the heap to 18 MB used (bench/soak.ts --gc).
 */

declare const Bun: { gc(force: boolean): void };

/** A synchronous full collection now (the ReclaimMemory port). */
export function reclaimBunMemory(): void {
  Bun.gc(true);
}
