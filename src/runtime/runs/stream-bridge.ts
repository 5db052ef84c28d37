import { systemClock } from "../../core/clock.ts";
import type { Clock } from "../../ports/runtime-ports.ts";
import { LocalSignals, type BusSignal, type StreamBus, type StreamFrame, type SubscribeOptions } from "./stream-bus.ts";
import { RunOperationError } from "./types.ts";

/*
 * Between a run's worker and its stream readers: the worker publishes frames, any number of
 * readers subscribe, join late or reconnect with Last-Event-ID. Each run keeps a bounded window
 * of its newest frames; a reader whose cursor fell out of that window is told so with one `gap`
 * frame instead of being handed a stream with a hole in it.
 */

export type { StreamFrame, SubscribeOptions };

export interface StreamGap {
  readonly code: "stream_replay_gap";
  readonly run_id: string;
  readonly requested_event_id: string | null;
  readonly earliest_available_event_id: string;
  readonly latest_available_event_id: string;
  readonly recovery: "reload_durable_state";
}

export interface StreamBridge {
  /** Starts a run's log, so readers that subscribe before the first frame wait for it. */
  open(runId: string): void;
  publish(runId: string, event: string, data: unknown): Promise<void>;
  /** Publishes the `end` frame (data null); nothing is published after it. */
  end(runId: string): Promise<void>;
  /** Whether the run's log is still held. */
  has(runId: string): boolean;
  /**
   * The frames after `lastEventId` (all retained ones without it), then live ones, ending after
   * `end`, or after a single `gap` frame when the cursor is older than the retained window. A
   * cursor past the newest frame replays nothing; a malformed one throws (see parseLastEventId).
   */
  subscribe(runId: string, options?: SubscribeOptions): AsyncIterable<StreamFrame>;
  /** Drops the run's log after `delayMs` (clock-driven), so late readers can still replay it. */
  release(runId: string, delayMs?: number): void;
  close(): Promise<void>;
}

export interface MemoryStreamBridgeOptions {
  readonly clock?: Clock;
  /** Frames retained per run (the replay window). Default 256. */
  readonly retain?: number;
  /** How long a finished run's log stays readable. Default 60 s. */
  readonly releaseAfterMs?: number;
  /**
   * Frames held at most, over every finished run whose log waits for its release (default 8192,
   * 32 full windows): past it the longest-finished run's log goes at once. A burst of 200 runs
   * otherwise kept every one of their windows for the whole grace period (bench/soak.ts: about
   * 150 KB of heap per demo run, the heap and RSS only coming back 60 s after the last run).
   */
  readonly retainReleasedFrames?: number;
  /** Told when a release left no run's log held (the memory of the last replay window is free). */
  readonly onDrained?: () => void;
}

/**
 * A frame as the log keeps it: its data as JSON text, serialized once when published. A window of
 * parsed frames is hundreds of small objects per run, and a non-moving heap (Bun's JavaScriptCore)
 * cannot give back a page while one of them lives on it: a burst's retained windows kept about
 * 30 MB of RSS beyond their own size (bench/soak.ts). One string per frame is one heap cell.
 */
interface LoggedFrame {
  readonly id: string;
  readonly event: string;
  readonly json: string;
}

const FRAME_JSON = Symbol("frame JSON");

/** The data of a frame as JSON text (null when absent), as an SSE `data:` line carries it. */
export function frameDataJson(data: unknown): string {
  return JSON.stringify(data ?? null) ?? "null";
}

/** The JSON text of a frame the bridge kept, without parsing it again; undefined for any other frame. */
export function serializedFrameData(frame: StreamFrame): string | undefined {
  return (frame as { [FRAME_JSON]?: string })[FRAME_JSON];
}

/** A kept frame as readers see it: `data` parsed on first read, the JSON text at hand for SSE. */
function readable(frame: LoggedFrame): StreamFrame {
  let parsed: { value: unknown } | undefined;
  const out = { id: frame.id, event: frame.event } as StreamFrame;
  Object.defineProperty(out, "data", {
    enumerable: true,
    get: () => (parsed ??= { value: JSON.parse(frame.json) as unknown }).value,
  });
  Object.defineProperty(out, FRAME_JSON, { value: frame.json });
  return out;
}

interface RunLog {
  frames: LoggedFrame[];
  /** The absolute seq of frames[0]. */
  start: number;
  nextSeq: number;
  ended: boolean;
  released: boolean;
  readonly waiters: Set<() => void>;
}

const FRAME_ID = /^(\d+)-(\d+)$/;
/** How a frame id is spelled, for messages. */
export const FRAME_ID_FORM = "<epoch_ms>-<seq>";

/**
 * A `Last-Event-ID` as a resume cursor: absent or empty means "from the start" (an EventSource
 * sends none until it saw an id); anything that is not `<epoch_ms>-<seq>` (two runs of digits)
 * is a 400 naming the header, never a silent replay of the whole stream.
 */
export function parseLastEventId(raw: string | null | undefined): string | undefined {
  if (raw === undefined || raw === null) return undefined;
  const value = raw.trim();
  if (value === "") return undefined;
  if (!FRAME_ID.test(value)) {
    throw new RunOperationError(
      "invalid_last_event_id",
      `Last-Event-ID ${JSON.stringify(value.slice(0, 80))} is not a frame id: expected ${FRAME_ID_FORM} (digits, e.g. "1767225600000-12") as sent in a frame's id line; leave the header out to read the stream from its start.`,
    );
  }
  return value;
}

export class MemoryStreamBridge implements StreamBridge, StreamBus {
  readonly #clock: Clock;
  readonly #retain: number;
  readonly #releaseAfterMs: number;
  readonly #retainReleasedFrames: number;
  /** Frames of the logs in #pendingReleases. */
  #releasedFrames = 0;
  readonly #onDrained: (() => void) | undefined;
  readonly #signals = new LocalSignals();
  readonly #logs = new Map<string, RunLog>();
  readonly #releases = new AbortController();
  readonly #pendingReleases: Array<{ readonly due: number; readonly runId: string; readonly log: RunLog; readonly frames: number }> = [];
  #sweeping = false;

  constructor(options: MemoryStreamBridgeOptions = {}) {
    this.#clock = options.clock ?? systemClock;
    this.#retain = Math.max(1, Math.floor(options.retain ?? 256));
    this.#releaseAfterMs = options.releaseAfterMs ?? 60_000;
    this.#retainReleasedFrames = Math.max(this.#retain, Math.floor(options.retainReleasedFrames ?? 8192));
    this.#onDrained = options.onDrained;
  }

  open(runId: string): void {
    this.#log(runId);
  }

  has(runId: string): boolean {
    return this.#logs.has(runId);
  }

  /** How many frames the run has published so far (0 for an unknown run). */
  published(runId: string): number {
    return this.#logs.get(runId)?.nextSeq ?? 0;
  }

  async publish(runId: string, event: string, data: unknown): Promise<void> {
    const log = this.#log(runId);
    if (log.ended) return;
    this.#append(log, event, data);
  }

  async end(runId: string): Promise<void> {
    const log = this.#log(runId);
    if (log.ended) return;
    this.#append(log, "end", null);
    log.ended = true;
    wake(log);
  }

  release(runId: string, delayMs = this.#releaseAfterMs): void {
    const log = this.#logs.get(runId);
    if (!log) return;
    if (delayMs <= 0) return this.#drop(runId, log);
    // One sweeper for every finished run (not a timer and an abort listener per run): releases
    // come due in about the order they were asked for, since the delay is the same for all.
    const due = this.#clock.now() + delayMs;
    let at = this.#pendingReleases.length;
    while (at > 0 && this.#pendingReleases[at - 1]!.due > due) at--;
    this.#pendingReleases.splice(at, 0, { due, runId, log, frames: log.frames.length });
    this.#releasedFrames += log.frames.length;
    // Over the budget: the logs released longest ago go first (the newest one always stays).
    while (this.#releasedFrames > this.#retainReleasedFrames && this.#pendingReleases.length > 1) this.#dropPending(this.#pendingReleases.shift()!);
    if (!this.#sweeping) void this.#sweep();
  }

  #drop(runId: string, log: RunLog): void {
    if (this.#logs.get(runId) !== log) return;
    this.#logs.delete(runId);
    log.released = true;
    wake(log);
    if (this.#logs.size === 0) this.#onDrained?.();
  }

  #dropPending(pending: { readonly runId: string; readonly log: RunLog; readonly frames: number }): void {
    this.#releasedFrames -= pending.frames;
    this.#drop(pending.runId, pending.log);
  }

  async #sweep(): Promise<void> {
    this.#sweeping = true;
    try {
      while (this.#pendingReleases.length > 0) {
        const wait = this.#pendingReleases[0]!.due - this.#clock.now();
        if (wait > 0) {
          try {
            await this.#clock.sleep(wait, this.#releases.signal);
          } catch {
            return;
          }
        }
        const now = this.#clock.now();
        while (this.#pendingReleases.length > 0 && this.#pendingReleases[0]!.due <= now) {
          this.#dropPending(this.#pendingReleases.shift()!);
        }
      }
    } finally {
      this.#sweeping = false;
    }
  }

  signal(signal: BusSignal): Promise<void> {
    return this.#signals.signal(signal);
  }

  listen(handler: (signal: BusSignal) => void): () => void {
    return this.#signals.listen(handler);
  }

  async close(): Promise<void> {
    this.#signals.clear();
    this.#releases.abort();
    this.#pendingReleases.length = 0;
    this.#releasedFrames = 0;
    for (const log of this.#logs.values()) {
      log.released = true;
      wake(log);
    }
    this.#logs.clear();
  }

  async *subscribe(runId: string, options: SubscribeOptions = {}): AsyncGenerator<StreamFrame> {
    const log = this.#logs.get(runId);
    if (!log) return;
    const { signal } = options;
    let cursor: string | null = options.lastEventId ?? null;
    let next = this.#startOffset(log, options.lastEventId);
    while (!signal?.aborted) {
      if (next < log.start) {
        yield { event: "gap", data: this.#gap(runId, log, cursor) };
        return;
      }
      const frame = log.frames[next - log.start];
      if (frame) {
        next += 1;
        cursor = frame.id;
        yield readable(frame);
        if (frame.event === "end") return;
        continue;
      }
      if (log.ended || log.released) return;
      await waitForChange(log, signal);
    }
  }

  #log(runId: string): RunLog {
    let log = this.#logs.get(runId);
    if (!log) {
      log = { frames: [], start: 0, nextSeq: 0, ended: false, released: false, waiters: new Set() };
      this.#logs.set(runId, log);
    }
    return log;
  }

  #append(log: RunLog, event: string, data: unknown): void {
    log.frames.push({ id: `${this.#clock.now()}-${log.nextSeq++}`, event, json: frameDataJson(data) });
    const overflow = log.frames.length - this.#retain;
    if (overflow > 0) {
      log.frames.splice(0, overflow);
      log.start += overflow;
    }
    wake(log);
  }

  /**
   * Where a cursor resumes; the seq decides (ids are per run, the epoch part only tells when). An id
   * inside the window resumes right after it. One just below the window resumes at its start (the
   * reader missed nothing); further below gets the gap: nothing is left to prove the reader saw
   * everything. One at or past the newest frame (a future seq) resumes after the newest: nothing
   * is replayed, live frames follow. A malformed id is refused (callers check it first).
   */
  #startOffset(log: RunLog, lastEventId: string | undefined): number {
    if (lastEventId === undefined) return log.start;
    const match = FRAME_ID.exec(parseLastEventId(lastEventId) ?? "");
    if (!match) return log.start;
    const seq = Number(match[2]);
    if (seq >= log.nextSeq) return log.nextSeq;
    if (seq < log.start) return seq + 1 < log.start ? -1 : log.start;
    return seq + 1;
  }

  #gap(runId: string, log: RunLog, requested: string | null): StreamGap {
    return {
      code: "stream_replay_gap",
      run_id: runId,
      requested_event_id: requested,
      earliest_available_event_id: log.frames[0]!.id,
      latest_available_event_id: log.frames[log.frames.length - 1]!.id,
      recovery: "reload_durable_state",
    };
  }
}

function wake(log: RunLog): void {
  const waiters = [...log.waiters];
  log.waiters.clear();
  for (const resolve of waiters) resolve();
}

function waitForChange(log: RunLog, signal: AbortSignal | undefined): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      signal?.removeEventListener("abort", done);
      log.waiters.delete(done);
      resolve();
    };
    log.waiters.add(done);
    signal?.addEventListener("abort", done, { once: true });
  });
}
