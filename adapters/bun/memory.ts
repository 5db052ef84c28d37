/*
 * Bun's collector also lets a quiet gateway keep a burst's garbage for a while: 60 s after the
 * last of a burst of 200 runs the heap still used 62 MB (start: 24), and a synchronous full
 * collection then took RSS from 290 to 241 MB, the heap to 18 MB used (bench/soak.ts --gc).
 * It reaches this thread's heap only: each sandbox worker collects its own once idle
 * (adapters/shared/web-sandbox-worker-entry.ts). What stays after a burst on Bun 1.4 is mostly
 * native (10 bursts of 200: heap 34-44 MB used of 54 committed, RSS 215-248 MB from 139).
 */

declare const Bun: { gc(force: boolean): void };

/** A synchronous full collection now (the ReclaimMemory port). */
export function reclaimBunMemory(): void {
  Bun.gc(true);
}
