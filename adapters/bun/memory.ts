/*
 * What a quiet Bun gateway keeps after a burst is mostly native, not its JS heap: after bursts of
 * 100 runs the heap used 34-36 MB of 42-48 committed while RSS sat at 193-211 MB from 138, rising
 * every burst (bench/soak.ts --runtime bun, 4 bursts of 100). Most of it was mimalloc's arena (one
 * 1 GiB reservation holding 143 of 210 MB resident, /proc/<pid>/smaps; 46 MB more is bun's own
 * text), part of it the code JSC compiled for the burst, which a collection keeps. Bun.gc(true)
 * collects; Bun.shrink() is JSC's VM::shrinkFootprintWhenIdle: once the current job ends it drops
 * all compiled code (deleteAllCode), collects again and releases WTF's free memory (the heap then
 * uses some 20 MB instead of 35, and the process 40-50 MB less). Both, in the gateway thread and
 * in each idle sandbox worker (adapters/shared/web-sandbox-worker-entry.ts, each worker its own
 * heap and code): RSS 152-159 MB after the bursts from 118, back within 3 s of the last run's
 * reclaim; the main thread alone 162-167 MB. 10 bursts of 200 (bench/soak.ts defaults): idle RSS
 * 165-187 MB from 118 (was 213-247 from 136), heap 20-28 MB used, 174.9 MB 60 s after the last
 * run, within the 64 MB margin from 36 s on (a second run: 166-186, 175.9, 38 s); what stays is
 * still mimalloc's arena, growing some 2 MB a burst. Code dropped is compiled again by the next
 * burst: 4 bursts of 100 back to back with and without, load 2-3: 25.2 s of bursts against 23.7;
 * the reclaim holds the event loop longer (slowest GET /api/ok while idle 176 ms against 40).
 */

declare const Bun: { gc(force: boolean): void; shrink(): void };

/**
 * A synchronous full collection now, then the compiled code dropped and what both freed released
 * once the current job ends (the ReclaimMemory port; also each idle sandbox worker's own reclaim).
 */
export function reclaimBunMemory(): void {
  Bun.gc(true);
  Bun.shrink();
}
