import { frameDataJson, parseLastEventId, type StreamFrame, type StreamGap, type SubscribeOptions } from "../../src/runtime/runs/stream-bridge.ts";
import type { BusSignal, StreamBus } from "../../src/runtime/runs/stream-bus.ts";
import type { DenoKvEntry, DenoKvKey, DenoKvWatchable } from "./kv-key-value.ts";

/*
 * StreamBus over Deno KV: a run's frames are keys [prefix, "f", run, seq] beside a small log head
 * [prefix, "h", run] ({ next, ended }); a publish writes the frame, moves the head and drops the
 * frame that left the window, in one commit checked against the head, so frames of a run get
 * consecutive seqs even if two isolates published. Readers replay with a list and wait for live
 * frames with `watch` on the head (it fires about 5 ms after a commit). Signals are a short log
 * too ([prefix, "s", n] behind the counter [prefix, "sh"]): a watch reports only the newest value
 * of a key, so two signals in quick succession on one key would lose the first.
 *
 * Across isolates this works where the database is shared by them, which is Deno Deploy (or KV
 * Connect); two processes opening one local KV file see each other's commits only when they read:
 * watch wakes nobody in the other process.
 */

interface LogHead {
  /** The seq the next frame gets. */
  readonly next: number;
  readonly ended: boolean;
}

interface KvFrame {
  readonly id: string;
  readonly event: string;
  readonly json: string;
}

export interface DenoKvStreamBusOptions {
  readonly kv: DenoKvWatchable;
  /** Key prefix inside the database (default ["bus"]). */
  readonly prefix?: readonly string[];
  /** Frames retained per run (the replay window). Default 256. */
  readonly retain?: number;
  /** How long a finished run's log stays readable. Default 60 s. */
  readonly releaseAfterMs?: number;
  /**
   * How long a log's keys live at most (`expireIn`), so a log whose process died before releasing
   * it goes eventually. Default 7 days: far past any run, since nothing renews it.
   */
  readonly maxLogMs?: number;
}

/** How long a signal's key lives: long enough for every listener's watch to list it. */
const SIGNAL_TTL_MS = 60_000;

export class DenoKvStreamBus implements StreamBus {
  readonly #kv: DenoKvWatchable;
  readonly #prefix: readonly string[];
  readonly #retain: number;
  readonly #releaseAfterMs: number;
  readonly #maxLogMs: number;
  readonly #origin = crypto.randomUUID();
  readonly #listeners = new Set<(signal: BusSignal) => void>();
  readonly #closed = new AbortController();
  readonly #timers = new Set<ReturnType<typeof setTimeout>>();
  /** Publishes of one run from this process, in order (a commit retry must not reorder them). */
  readonly #chains = new Map<string, Promise<void>>();
  #signalWatch: Promise<void> | undefined;

  constructor(options: DenoKvStreamBusOptions) {
    this.#kv = options.kv;
    this.#prefix = options.prefix ?? ["bus"];
    this.#retain = Math.max(1, Math.floor(options.retain ?? 256));
    this.#releaseAfterMs = options.releaseAfterMs ?? 60_000;
    this.#maxLogMs = options.maxLogMs ?? 7 * 24 * 3600_000;
  }

  #head = (runId: string): DenoKvKey => [...this.#prefix, "h", runId];
  #frame = (runId: string, seq: number): DenoKvKey => [...this.#prefix, "f", runId, seq];
  #signalHead = (): DenoKvKey => [...this.#prefix, "sh"];
  #signal = (n: number): DenoKvKey => [...this.#prefix, "s", n];

  async open(runId: string): Promise<void> {
    await this.#kv.atomic().check({ key: this.#head(runId), versionstamp: null }).set(this.#head(runId), { next: 0, ended: false } satisfies LogHead, { expireIn: this.#maxLogMs }).commit();
  }

  async has(runId: string): Promise<boolean> {
    return (await this.#kv.get(this.#head(runId))).versionstamp !== null;
  }

  publish(runId: string, event: string, data: unknown): Promise<void> {
    return this.#append(runId, event, frameDataJson(data));
  }

  end(runId: string): Promise<void> {
    return this.#append(runId, "end", "null");
  }

  #append(runId: string, event: string, json: string): Promise<void> {
    const previous = this.#chains.get(runId) ?? Promise.resolve();
    const next = previous.then(() => this.#commitFrame(runId, event, json));
    const tail = next.catch(() => undefined);
    this.#chains.set(runId, tail);
    void tail.then(() => {
      if (this.#chains.get(runId) === tail) this.#chains.delete(runId);
    });
    return next;
  }

  async #commitFrame(runId: string, event: string, json: string): Promise<void> {
    for (;;) {
      const entry = await this.#kv.get(this.#head(runId));
      const head = (entry.value as LogHead | null) ?? { next: 0, ended: false };
      if (head.ended) return;
      const seq = head.next;
      const op = this.#kv
        .atomic()
        .check({ key: entry.key, versionstamp: entry.versionstamp })
        .set(this.#frame(runId, seq), { id: `${Date.now()}-${seq}`, event, json } satisfies KvFrame, { expireIn: this.#maxLogMs })
        .set(entry.key, { next: seq + 1, ended: event === "end" } satisfies LogHead, { expireIn: this.#maxLogMs });
      if (seq >= this.#retain) op.delete(this.#frame(runId, seq - this.#retain));
      if ((await op.commit()).ok) return;
    }
  }

  async *subscribe(runId: string, options: SubscribeOptions = {}): AsyncGenerator<StreamFrame> {
    const { signal } = options;
    const first = await this.#kv.get(this.#head(runId));
    if (first.versionstamp === null) return;
    let head = first.value as LogHead;
    let cursor: string | null = options.lastEventId ?? null;
    let next = this.#startSeq(head, options.lastEventId);
    // The watch starts before the first replay, so a frame committed between the two is not missed.
    const watch = this.#kv.watch([this.#head(runId)]).getReader();
    const stop = () => void watch.cancel().catch(() => undefined);
    signal?.addEventListener("abort", stop, { once: true });
    this.#closed.signal.addEventListener("abort", stop, { once: true });
    try {
      while (!signal?.aborted && !this.#closed.signal.aborted) {
        if (next < head.next) {
          const frames: KvFrame[] = [];
          for await (const entry of this.#kv.list({ start: this.#frame(runId, next), end: this.#frame(runId, head.next) }, { batchSize: 64 })) {
            frames.push(entry.value as KvFrame);
          }
          const firstSeq = frames.length > 0 ? seqOf(frames[0]!) : head.next;
          if (firstSeq > next) {
            // The window moved past the cursor (or the log went) while we waited.
            const gap = await this.#gap(runId, cursor);
            if (gap) yield { event: "gap", data: gap };
            return;
          }
          for (const frame of frames) {
            next = seqOf(frame) + 1;
            cursor = frame.id;
            yield readable(frame);
            if (frame.event === "end") return;
          }
          continue;
        }
        if (head.ended) return;
        const change = await watch.read();
        if (change.done) return;
        const entry = change.value[0] as DenoKvEntry | undefined;
        if (!entry || entry.versionstamp === null) return;
        head = entry.value as LogHead;
      }
    } finally {
      signal?.removeEventListener("abort", stop);
      this.#closed.signal.removeEventListener("abort", stop);
      stop();
    }
  }

  /** Where a cursor resumes, as MemoryStreamBridge decides it; -1 asks for the gap. */
  #startSeq(head: LogHead, lastEventId: string | undefined): number {
    const start = Math.max(0, head.next - this.#retain);
    if (lastEventId === undefined) return start;
    const seq = Number(/^(\d+)-(\d+)$/.exec(parseLastEventId(lastEventId) ?? "")?.[2] ?? -1);
    if (seq < 0) return start;
    if (seq >= head.next) return head.next;
    if (seq < start) return seq + 1 < start ? -1 : start;
    return seq + 1;
  }

  async #gap(runId: string, requested: string | null): Promise<StreamGap | undefined> {
    const frames: KvFrame[] = [];
    for await (const entry of this.#kv.list({ prefix: [...this.#prefix, "f", runId] }, { limit: 1 })) frames.push(entry.value as KvFrame);
    for await (const entry of this.#kv.list({ prefix: [...this.#prefix, "f", runId] }, { limit: 1, reverse: true })) frames.push(entry.value as KvFrame);
    if (frames.length < 2) return undefined;
    return {
      code: "stream_replay_gap",
      run_id: runId,
      requested_event_id: requested,
      earliest_available_event_id: frames[0]!.id,
      latest_available_event_id: frames[1]!.id,
      recovery: "reload_durable_state",
    };
  }

  release(runId: string, delayMs: number = this.#releaseAfterMs): void {
    if (this.#closed.signal.aborted) return;
    if (delayMs <= 0) {
      void this.#drop(runId);
      return;
    }
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      void this.#drop(runId);
    }, delayMs);
    this.#timers.add(timer);
  }

  async #drop(runId: string): Promise<void> {
    const keys: DenoKvKey[] = [this.#head(runId)];
    for await (const entry of this.#kv.list({ prefix: [...this.#prefix, "f", runId] }, { batchSize: 500 })) keys.push(entry.key);
    // The head goes first, so a reader's watch ends before its frames vanish under it.
    for (let i = 0; i < keys.length; i += 500) {
      const op = this.#kv.atomic();
      for (const key of keys.slice(i, i + 500)) op.delete(key);
      await op.commit().catch(() => undefined);
    }
  }

  async signal(signal: BusSignal): Promise<void> {
    // Delivered here at once; the watch skips what this instance wrote.
    this.#deliver(signal);
    for (;;) {
      const entry = await this.#kv.get(this.#signalHead());
      const n = typeof entry.value === "number" ? entry.value : 0;
      const ok = await this.#kv
        .atomic()
        .check({ key: entry.key, versionstamp: entry.versionstamp })
        .set(this.#signal(n), { origin: this.#origin, signal }, { expireIn: SIGNAL_TTL_MS })
        .set(entry.key, n + 1)
        .commit();
      if (ok.ok) return;
    }
  }

  listen(handler: (signal: BusSignal) => void): () => void {
    this.#listeners.add(handler);
    this.#signalWatch ??= this.#watchSignals();
    return () => {
      this.#listeners.delete(handler);
    };
  }

  async #watchSignals(): Promise<void> {
    const watch = this.#kv.watch([this.#signalHead()]).getReader();
    this.#closed.signal.addEventListener("abort", () => void watch.cancel().catch(() => undefined), { once: true });
    try {
      // Where the log stood when listening began: only what comes after is news.
      const start = (await this.#kv.get(this.#signalHead())).value;
      let seen = typeof start === "number" ? start : 0;
      for (;;) {
        const change = await watch.read();
        if (change.done) return;
        const n = typeof change.value[0]?.value === "number" ? change.value[0].value : 0;
        if (n <= seen) continue;
        const from = seen;
        seen = n;
        for await (const entry of this.#kv.list({ start: this.#signal(from), end: this.#signal(n) })) {
          const { origin, signal } = entry.value as { origin: string; signal: BusSignal };
          if (origin !== this.#origin) this.#deliver(signal);
        }
      }
    } catch {
      // The watch ended with the Kv handle (closed): nothing more to deliver.
    }
  }

  #deliver(signal: BusSignal): void {
    for (const handler of [...this.#listeners]) {
      try {
        handler(signal);
      } catch {
        // One listener's failure is not another's: each gets every signal.
      }
    }
  }

  async close(): Promise<void> {
    this.#closed.abort();
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
    this.#listeners.clear();
    await this.#signalWatch;
    await Promise.all([...this.#chains.values()]);
  }
}

function seqOf(frame: KvFrame): number {
  return Number(frame.id.slice(frame.id.indexOf("-") + 1));
}

function readable(frame: KvFrame): StreamFrame {
  let parsed: { value: unknown } | undefined;
  const out = { id: frame.id, event: frame.event } as StreamFrame;
  Object.defineProperty(out, "data", { enumerable: true, get: () => (parsed ??= { value: JSON.parse(frame.json) as unknown }).value });
  return out;
}
