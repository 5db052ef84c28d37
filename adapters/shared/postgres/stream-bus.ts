import pg from "pg";
import { frameDataJson, parseLastEventId, type StreamFrame, type StreamGap, type SubscribeOptions } from "../../../src/runtime/runs/stream-bridge.ts";
import type { BusSignal, StreamBus } from "../../../src/runtime/runs/stream-bus.ts";

/*
 * The stream bus over PostgreSQL: frames are rows (deerflow_run_frames), so any worker reads a
 * run's frames after any id; NOTIFY only makes readers fast. A frame small enough rides in the
 * notification itself (the reader needs no query); a larger one is announced by (run, seq) and
 * read from the table. Every subscriber reads the table after its cursor first and again whenever
 * it may have missed something (a hole in the seqs, a reconnect of the LISTEN client, a quiet
 * poll), so a lost notification delays a frame but never loses it.
 *
 * Publishing does not wait for the database: a run's frames go to an outbox that one flush at a
 * time writes in order, every frame queued by then in one statement (and one commit), so a run
 * that streams tokens costs a few commits instead of one per frame, and its graph does not wait a
 * round trip per token. `end` resolves once every frame before it is committed; a failed write
 * makes the run's next publish or end reject with its error (the frames it held are lost: the
 * run's stream has a hole, so the run must fail, as it did when each publish awaited its write).
 * A subscription that starts waits for the frames already queued, as for a write under way.
 *
 * The process that opened a run's log (the run's owner) writes every frame of it, so it knows the
 * log's state without asking: has() and a subscription's start read it from memory, and a reader
 * that starts with nothing committed past its position skips its first table read (a frame that
 * commits meanwhile arrives as a notification; a notification that raced its registration shows
 * as a hole, which reads the table). That is three statements fewer for every stream of a run
 * read on its own worker, the common case. The knowledge ends when the log is released, and when a
 * write finds the log ended by someone else (a sweep after this process lost its lease).
 */

export interface PostgresStreamBusOptions {
  readonly pool: pg.Pool;
  /** For the one LISTEN connection of this bus (a pooled connection cannot keep LISTENing). */
  readonly clientConfig: pg.ClientConfig;
  /** Frames retained per run (the replay window). Default 256. */
  readonly retain?: number;
  /** How long a finished run's log stays readable after release. Default 60 s. */
  readonly releaseAfterMs?: number;
}

const FRAMES_CHANNEL = "deerflow_frames";
const SIGNALS_CHANNEL = "deerflow_signals";
/** PostgreSQL refuses a NOTIFY payload of 8000 bytes or more; the rest is headroom. */
const INLINE_LIMIT = 7900;
/** Frames one table read fetches. */
const READ_BATCH = 128;
/** How often a waiting subscriber looks at the table anyway (the fallback for a notification that never came). */
const POLL_MS = 1000;
/** Frames one flush writes at most in one statement. */
const FLUSH_BATCH = 64;
/** Queued frames past which publish waits for the flush under way (a publisher faster than the database). */
const OUTBOX_HIGH_WATER = 256;
/** Trim a run's window every this many frames, not on every publish. */
const TRIM_EVERY = 64;
const RECONNECT_MIN_MS = 50;
const RECONNECT_MAX_MS = 5000;

interface Frame {
  readonly seq: number;
  readonly id: string;
  readonly event: string;
  readonly json: string;
}

interface QueuedFrame {
  readonly event: string;
  readonly json: string;
  readonly ending: boolean;
  /** The newest subscription ticket when it was queued: those subscriptions take their position first. */
  readonly after: number;
}

/** A run's frames not yet written, and the one flush writing them. */
interface Outbox {
  readonly frames: QueuedFrame[];
  /** Frames ever queued here, and of them written (or dropped by a failure). */
  queued: number;
  written: number;
  /** Who waits for `written` to reach a count. */
  readonly waiters: Set<{ readonly count: number; readonly done: () => void }>;
  flushing: Promise<void> | undefined;
  /** The write that failed: the run's later publishes and end reject with it. */
  failed: { readonly error: unknown } | undefined;
}

interface Subscriber {
  readonly runId: string;
  /** The seq it yields next. */
  next: number;
  /** Live frames that arrived ahead of the reader. */
  readonly buffer: Map<number, Frame>;
  /** Something may be in the table that the buffer lacks. */
  dirty: boolean;
  wake: (() => void) | undefined;
}

interface StreamState {
  readonly nextSeq: number;
  readonly ended: boolean;
}

const FRAME_ID = /^(\d+)-(\d+)$/;

function toFrame(row: { seq: number; id: string; event: string; data: string }): Frame {
  return { seq: Number(row.seq), id: row.id, event: row.event, json: row.data };
}

function readable(frame: Frame): StreamFrame {
  return { id: frame.id, event: frame.event, data: JSON.parse(frame.json) as unknown };
}

/** A notification on the frames channel: `[run_id, seq, id, event]` then, when it fit, a newline and the data. */
function parseFrameNotice(payload: string): { runId: string; frame?: Frame; seq: number | null } | undefined {
  const newline = payload.indexOf("\n");
  try {
    const header = JSON.parse(newline < 0 ? payload : payload.slice(0, newline)) as [string, number | null, string?, string?];
    const [runId, seq, id, event] = header;
    if (typeof runId !== "string") return undefined;
    if (newline < 0 || typeof seq !== "number" || typeof id !== "string" || typeof event !== "string") return { runId, seq: typeof seq === "number" ? seq : null };
    return { runId, seq, frame: { seq, id, event, json: payload.slice(newline + 1) } };
  } catch {
    return undefined;
  }
}

export class PostgresStreamBus implements StreamBus {
  readonly #pool: pg.Pool;
  readonly #clientConfig: pg.ClientConfig;
  readonly #retain: number;
  readonly #releaseAfterMs: number;
  readonly #subscribers = new Map<string, Set<Subscriber>>();
  readonly #listeners = new Set<(signal: BusSignal) => void>();
  /** Writes started by sync methods (release, trims), awaited by close and by readers of the same run. */
  readonly #pending = new Map<string, Promise<unknown>>();
  readonly #outboxes = new Map<string, Outbox>();
  /** The state of the logs this process opened and writes: committed frames, and whether `end` is among them. */
  readonly #owned = new Map<string, { nextSeq: number; ended: boolean }>();
  /** Subscriptions of this process still taking their starting position, per run, by ticket. */
  readonly #starts = new Map<string, Map<number, Promise<unknown>>>();
  #tickets = 0;
  #client: pg.Client | undefined;
  #starting: Promise<void> | undefined;
  #reconnectDelay = RECONNECT_MIN_MS;
  #reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  #cleanupTimer: ReturnType<typeof setInterval> | undefined;
  #cleaning: Promise<void> | undefined;
  #closed = false;
  readonly #closing = new AbortController();

  constructor(options: PostgresStreamBusOptions) {
    this.#pool = options.pool;
    this.#clientConfig = options.clientConfig;
    this.#retain = Math.max(1, Math.floor(options.retain ?? 256));
    this.#releaseAfterMs = options.releaseAfterMs ?? 60_000;
  }

  /** Opens the LISTEN connection and starts the periodic cleanup of released logs. */
  start(): Promise<void> {
    if (this.#closed) return Promise.reject(new Error("PostgresStreamBus is closed; open a new one."));
    this.#starting ??= (async () => {
      try {
        await this.#connect();
      } catch (error) {
        // Not started: the next call tries again (the database may be back by then).
        this.#starting = undefined;
        throw error;
      }
      const every = Math.max(50, Math.min(1000, this.#releaseAfterMs / 2));
      this.#cleanupTimer = setInterval(() => {
        // One round at a time; close() waits for the one under way.
        this.#cleaning ??= this.#cleanup().finally(() => (this.#cleaning = undefined));
      }, every);
      this.#cleanupTimer.unref?.();
    })();
    return this.#starting;
  }

  async #connect(): Promise<void> {
    const client = new pg.Client(this.#clientConfig);
    const lost = () => this.#lost(client);
    client.on("error", lost);
    client.on("end", lost);
    client.on("notification", (message) => this.#notified(message.channel, message.payload ?? ""));
    try {
      await client.connect();
      await client.query(`LISTEN ${FRAMES_CHANNEL}; LISTEN ${SIGNALS_CHANNEL}`);
    } catch (error) {
      client.removeAllListeners();
      client.on("error", () => undefined);
      await client.end().catch(() => undefined);
      throw error;
    }
    if (this.#closed) {
      await client.end().catch(() => undefined);
      return;
    }
    this.#client = client;
    this.#reconnectDelay = RECONNECT_MIN_MS;
    // Whatever was published while no connection listened is in the table: every reader looks.
    this.#markAllDirty();
  }

  #lost(client: pg.Client): void {
    if (this.#client !== client) return;
    this.#client = undefined;
    client.removeAllListeners();
    client.on("error", () => undefined);
    void client.end().catch(() => undefined);
    this.#scheduleReconnect();
  }

  #scheduleReconnect(): void {
    if (this.#closed || this.#reconnectTimer) return;
    const delay = this.#reconnectDelay;
    this.#reconnectDelay = Math.min(RECONNECT_MAX_MS, delay * 2);
    this.#reconnectTimer = setTimeout(() => {
      this.#reconnectTimer = undefined;
      this.#connect().catch(() => this.#scheduleReconnect());
    }, delay);
  }

  #markAllDirty(): void {
    for (const subs of this.#subscribers.values()) for (const sub of subs) wakeDirty(sub);
  }

  #notified(channel: string, payload: string): void {
    if (channel === SIGNALS_CHANNEL) {
      let signal: BusSignal;
      try {
        signal = JSON.parse(payload) as BusSignal;
      } catch {
        return;
      }
      for (const handler of [...this.#listeners]) {
        try {
          handler(signal);
        } catch {
          // One failing listener must not keep the signal from the others.
        }
      }
      return;
    }
    const notice = parseFrameNotice(payload);
    if (!notice) return;
    const subs = this.#subscribers.get(notice.runId);
    if (!subs) return;
    for (const sub of subs) {
      if (notice.frame && notice.frame.seq >= sub.next) {
        sub.buffer.set(notice.frame.seq, notice.frame);
        // A reader this far behind reads from the table, where the window decides what it gets.
        if (sub.buffer.size > this.#retain) {
          sub.buffer.clear();
          sub.dirty = true;
        }
      } else if (!notice.frame) sub.dirty = true;
      sub.wake?.();
    }
  }

  async open(runId: string): Promise<void> {
    const { rows } = await this.#pool.query<{ next_seq: number; ended: boolean }>(
      `INSERT INTO deerflow_run_streams (run_id) VALUES ($1) ON CONFLICT (run_id) DO UPDATE SET release_at = NULL RETURNING next_seq, ended`,
      [runId],
    );
    const row = rows[0];
    if (row) this.#owned.set(runId, { nextSeq: Number(row.next_seq), ended: row.ended });
  }

  async has(runId: string): Promise<boolean> {
    await this.#pending.get(runId);
    await this.#written(runId);
    return this.#owned.has(runId) || (await this.#state(runId)) !== undefined;
  }

  publish(runId: string, event: string, data: unknown): Promise<void> {
    return this.#enqueue(runId, event, frameDataJson(data), false);
  }

  async end(runId: string): Promise<void> {
    try {
      await this.#enqueue(runId, "end", "null", true);
      await this.#written(runId);
      const failed = this.#outboxes.get(runId)?.failed;
      if (failed) throw failed.error;
    } finally {
      // Nothing of the run is queued or flushing now (a failed outbox holds only its error).
      if (!this.#outboxes.get(runId)?.flushing) this.#outboxes.delete(runId);
    }
  }

  /** Queues a frame; resolves at once unless the outbox is past its high water (then when the flush under way is done). */
  #enqueue(runId: string, event: string, json: string, ending: boolean): Promise<void> {
    let box = this.#outboxes.get(runId);
    if (!box) this.#outboxes.set(runId, (box = { frames: [], queued: 0, written: 0, waiters: new Set(), flushing: undefined, failed: undefined }));
    if (box.failed) return Promise.reject(box.failed.error);
    box.frames.push({ event, json, ending, after: this.#tickets });
    box.queued += 1;
    box.flushing ??= this.#flush(runId, box);
    return box.frames.length >= OUTBOX_HIGH_WATER ? box.flushing : Promise.resolve();
  }

  /** Resolves once every frame of the run queued so far is written (or dropped by a failed write). */
  #written(runId: string): Promise<void> {
    const box = this.#outboxes.get(runId);
    if (!box || box.written >= box.queued) return Promise.resolve();
    const count = box.queued;
    return new Promise<void>((done) => box.waiters.add({ count, done }));
  }

  #advance(box: Outbox, frames: number): void {
    box.written += frames;
    for (const waiter of [...box.waiters]) {
      if (box.written < waiter.count) continue;
      box.waiters.delete(waiter);
      waiter.done();
    }
  }

  /**
   * Writes the outbox in order until it is empty; a failure keeps its error for the run and drops
   * what was queued. A batch holds frames queued between the same two subscription starts, and
   * waits for the subscriptions begun before them to take their position (which wait only for
   * frames queued before they began, so for earlier batches): a reader told "from now on" sees
   * every frame published after it subscribed.
   */
  async #flush(runId: string, box: Outbox): Promise<void> {
    try {
      while (box.frames.length > 0) {
        const after = box.frames[0]!.after;
        // The batch: frames of one ticket interval, at most FLUSH_BATCH, ending at an `end` (what
        // follows it gets a statement of its own, which the database refuses).
        let size = 0;
        while (size < FLUSH_BATCH && size < box.frames.length && box.frames[size]!.after === after && !box.frames[size - 1]?.ending) size += 1;
        const starts = this.#starts.get(runId);
        if (starts) await Promise.allSettled([...starts].filter(([ticket]) => ticket <= after).map(([, position]) => position));
        const batch = box.frames.splice(0, size);
        await this.#append(runId, batch);
        this.#advance(box, batch.length);
      }
    } catch (error) {
      box.failed = { error };
      box.frames.length = 0;
      // The failed batch and what was queued behind it count as done: nobody waits for them.
      this.#advance(box, box.queued - box.written);
    } finally {
      box.flushing = undefined;
      if (!box.failed && box.frames.length === 0 && this.#outboxes.get(runId) === box) this.#outboxes.delete(runId);
    }
  }

  /** One statement: takes the batch's seqs (nothing after `end`), stores its frames, and notifies each at commit. */
  async #append(runId: string, batch: readonly QueuedFrame[]): Promise<void> {
    const ending = batch.at(-1)?.ending === true;
    const { rows } = await this.#pool.query<{ last: number | null }>(
      `WITH s AS (
         INSERT INTO deerflow_run_streams AS st (run_id, next_seq, ended) VALUES ($1, $3::int, $4)
         ON CONFLICT (run_id) DO UPDATE SET next_seq = st.next_seq + $3::int, ended = $4 WHERE NOT st.ended
         RETURNING st.next_seq - $3::int AS first
       ), b AS (
         SELECT s.first + b.ord - 1 AS seq, b.e ->> 0 AS event, b.e ->> 1 AS data FROM s, json_array_elements($2::json) WITH ORDINALITY AS b(e, ord)
       ), f AS (
         INSERT INTO deerflow_run_frames (run_id, seq, id, event, data)
         SELECT $1, b.seq, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint || '-' || b.seq, b.event, b.data FROM b
         RETURNING seq, id, event, data
       ), n AS (
         SELECT f.seq, f.data, json_build_array($1::text, f.seq, f.id, f.event)::text AS header FROM f
       )
       SELECT max(seq) AS last, count(pg_notify('${FRAMES_CHANNEL}', CASE WHEN octet_length(header) + 1 + octet_length(data) < ${INLINE_LIMIT}
         THEN header || E'\\n' || data ELSE header END)) FROM n`,
      // The batch as one JSON text of [event, data] pairs: V8's JSON.stringify escapes it natively,
      // where a text[] parameter went through pg's array quoting in JS (0.9 ms of a worker's CPU per
      // scripted run, profiled).
      [runId, JSON.stringify(batch.map((frame) => [frame.event, frame.json])), batch.length, ending],
    );
    const last = rows[0]?.last;
    const owned = this.#owned.get(runId);
    if (last === null || last === undefined) {
      // Refused: the log had ended (a sweep ended it for this process), or is gone.
      this.#owned.delete(runId);
      return;
    }
    if (owned) {
      owned.nextSeq = Number(last) + 1;
      owned.ended = ending;
    }
    const first = Number(last) - batch.length + 1;
    // Trim when the batch crossed a multiple of TRIM_EVERY (every TRIM_EVERY frames, as one at a time did).
    const crossed = Math.floor((Number(last) + 1) / TRIM_EVERY) > Math.floor(first / TRIM_EVERY);
    if (crossed && Number(last) + 1 > this.#retain) {
      this.#track(runId, this.#pool.query(`DELETE FROM deerflow_run_frames WHERE run_id = $1 AND seq < $2`, [runId, Number(last) + 1 - this.#retain]));
    }
  }

  release(runId: string, delayMs: number = this.#releaseAfterMs): void {
    this.#owned.delete(runId);
    const box = this.#outboxes.get(runId);
    if (box && !box.flushing) this.#outboxes.delete(runId);
    const write =
      delayMs <= 0
        ? this.#drop(runId)
        : this.#pool.query(`UPDATE deerflow_run_streams SET release_at = now() + $2::double precision * interval '1 ms' WHERE run_id = $1`, [runId, delayMs]);
    this.#track(runId, write);
  }

  async #drop(runId: string): Promise<void> {
    await this.#pool.query(`DELETE FROM deerflow_run_streams WHERE run_id = $1`, [runId]);
    await this.#pool.query(`DELETE FROM deerflow_run_frames WHERE run_id = $1`, [runId]);
    // Readers of the run anywhere look at the table, find it gone and stop.
    await this.#pool.query(`SELECT pg_notify('${FRAMES_CHANNEL}', json_build_array($1::text, null)::text)`, [runId]);
  }

  #track(runId: string, write: Promise<unknown>): void {
    const settled = write.then(
      () => undefined,
      () => undefined,
    );
    const chained = Promise.all([this.#pending.get(runId), settled]);
    this.#pending.set(runId, chained);
    void chained.then(() => {
      if (this.#pending.get(runId) === chained) this.#pending.delete(runId);
    });
  }

  /** Drops every log whose release came due (any worker may do it; the DELETE makes it once). */
  async #cleanup(): Promise<void> {
    try {
      const { rows } = await this.#pool.query<{ run_id: string }>(`DELETE FROM deerflow_run_streams WHERE release_at <= now() RETURNING run_id`);
      if (rows.length === 0) return;
      const ids = rows.map((r) => r.run_id);
      await this.#pool.query(`DELETE FROM deerflow_run_frames WHERE run_id = ANY($1::text[])`, [ids]);
      await this.#pool.query(`SELECT pg_notify('${FRAMES_CHANNEL}', json_build_array(id, null)::text) FROM unnest($1::text[]) AS id`, [ids]);
    } catch {
      // The database is away; the next round tries again.
    }
  }

  /** The run's log, or undefined when it is not held (never opened, dropped, or its release came due). */
  async #state(runId: string): Promise<StreamState | undefined> {
    const { rows } = await this.#pool.query<{ next_seq: number; ended: boolean }>(
      `SELECT next_seq, ended FROM deerflow_run_streams WHERE run_id = $1 AND (release_at IS NULL OR release_at > now())`,
      [runId],
    );
    const row = rows[0];
    return row ? { nextSeq: Number(row.next_seq), ended: row.ended } : undefined;
  }

  async *subscribe(runId: string, options: SubscribeOptions = {}): AsyncGenerator<StreamFrame> {
    const { signal } = options;
    const cursorSeq = cursorOf(options.lastEventId);
    const sub: Subscriber = { runId, next: 0, buffer: new Map(), dirty: true, wake: undefined };
    // Taken before any await: a publish this process makes after the subscription began waits for
    // its starting position, so a reader told "from now on" (a cursor past the newest) sees it.
    const ticket = ++this.#tickets;
    const position = this.#position(runId, cursorSeq, sub);
    let starts = this.#starts.get(runId);
    if (!starts) this.#starts.set(runId, (starts = new Map()));
    starts.set(ticket, position);
    let state: StreamState | undefined;
    try {
      state = await position;
    } finally {
      starts.delete(ticket);
      if (starts.size === 0 && this.#starts.get(runId) === starts) this.#starts.delete(runId);
    }
    try {
      if (!state) return;
      let cursor: string | null = options.lastEventId ?? null;
      while (!signal?.aborted && !this.#closed) {
        if (sub.next < 0) {
          yield { event: "gap", data: await this.#gap(runId, cursor) };
          return;
        }
        const frame = sub.buffer.get(sub.next);
        if (frame) {
          sub.buffer.delete(sub.next);
          sub.next += 1;
          cursor = frame.id;
          yield readable(frame);
          if (frame.event === "end") return;
          continue;
        }
        if (sub.buffer.size > 0) sub.dirty = true;
        if (sub.dirty) {
          sub.dirty = false;
          const read = await this.#read(runId, sub.next);
          if (!read) return;
          if (sub.next < this.#windowStart(read.state)) {
            sub.next = -1;
            continue;
          }
          for (const f of read.frames) if (f.seq >= sub.next) sub.buffer.set(f.seq, f);
          for (const seq of sub.buffer.keys()) if (seq < sub.next) sub.buffer.delete(seq);
          if (read.frames.length === READ_BATCH) sub.dirty = true;
          // Ended, and nothing left to read (its `end` frame already went out, or was never written).
          if (read.frames.length === 0 && read.state.ended && sub.next >= read.state.nextSeq) return;
          if (read.frames.length > 0) continue;
        }
        await this.#wait(sub, signal);
      }
    } finally {
      this.#unsubscribe(sub);
    }
  }

  /** Registers `sub` and sets where it starts reading; undefined when the run's log is not held. */
  async #position(runId: string, cursorSeq: number | undefined, sub: Subscriber): Promise<StreamState | undefined> {
    // Frames queued before this subscription began count as published before it (taken now, before any await).
    const queuedBefore = this.#written(runId);
    await this.start();
    await this.#pending.get(runId);
    await queuedBefore;
    // Registered before the first read: a frame committed after that read arrives as a notification.
    let subs = this.#subscribers.get(runId);
    if (!subs) this.#subscribers.set(runId, (subs = new Set()));
    subs.add(sub);
    try {
      const owned = this.#owned.get(runId);
      const state = owned ? { ...owned } : await this.#state(runId);
      if (!state) {
        this.#unsubscribe(sub);
        return undefined;
      }
      const start = this.#windowStart(state);
      if (cursorSeq === undefined) sub.next = start;
      else if (cursorSeq >= state.nextSeq) sub.next = state.nextSeq;
      else if (cursorSeq + 1 < start) sub.next = -1;
      else sub.next = Math.max(start, cursorSeq + 1);
      // Nothing committed past the position, and more to come: the table has nothing to give yet.
      if (owned && !state.ended && sub.next >= state.nextSeq) sub.dirty = false;
      return state;
    } catch (error) {
      this.#unsubscribe(sub);
      throw error;
    }
  }

  #unsubscribe(sub: Subscriber): void {
    const subs = this.#subscribers.get(sub.runId);
    if (!subs) return;
    subs.delete(sub);
    if (subs.size === 0) this.#subscribers.delete(sub.runId);
  }

  #windowStart(state: StreamState): number {
    return Math.max(0, state.nextSeq - this.#retain);
  }

  async #read(runId: string, from: number): Promise<{ state: StreamState; frames: Frame[] } | undefined> {
    const { rows } = await this.#pool.query<{ next_seq: number; ended: boolean; seq: number | null; id: string; event: string; data: string }>(
      `SELECT s.next_seq, s.ended, f.seq, f.id, f.event, f.data FROM deerflow_run_streams s
       LEFT JOIN LATERAL (
         SELECT seq, id, event, data FROM deerflow_run_frames WHERE run_id = s.run_id AND seq >= $2 ORDER BY seq LIMIT ${READ_BATCH}
       ) f ON true
       WHERE s.run_id = $1 AND (s.release_at IS NULL OR s.release_at > now())
       ORDER BY f.seq`,
      [runId, from],
    );
    const first = rows[0];
    if (!first) return undefined;
    return {
      state: { nextSeq: Number(first.next_seq), ended: first.ended },
      frames: rows.filter((r) => r.seq !== null).map((r) => toFrame(r as { seq: number; id: string; event: string; data: string })),
    };
  }

  /** Shaped as MemoryStreamBridge's gap: the window's first and last ids as they are now. */
  async #gap(runId: string, requested: string | null): Promise<StreamGap> {
    const { rows } = await this.#pool.query<{ first_id: string; last_id: string }>(
      `SELECT (SELECT id FROM deerflow_run_frames WHERE run_id = $1 AND seq = GREATEST(0, s.next_seq - $2)) AS first_id,
              (SELECT id FROM deerflow_run_frames WHERE run_id = $1 AND seq = s.next_seq - 1) AS last_id
       FROM deerflow_run_streams s WHERE s.run_id = $1`,
      [runId, this.#retain],
    );
    return {
      code: "stream_replay_gap",
      run_id: runId,
      requested_event_id: requested,
      earliest_available_event_id: rows[0]?.first_id ?? "",
      latest_available_event_id: rows[0]?.last_id ?? "",
      recovery: "reload_durable_state",
    };
  }

  #wait(sub: Subscriber, signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        sub.dirty = true;
        done();
      }, POLL_MS);
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", done);
        this.#closing.signal.removeEventListener("abort", done);
        sub.wake = undefined;
        resolve();
      };
      sub.wake = done;
      signal?.addEventListener("abort", done, { once: true });
      this.#closing.signal.addEventListener("abort", done, { once: true });
    });
  }

  async signal(signal: BusSignal): Promise<void> {
    await this.#pool.query(`SELECT pg_notify('${SIGNALS_CHANNEL}', $1)`, [JSON.stringify(signal)]);
  }

  listen(handler: (signal: BusSignal) => void): () => void {
    this.#listeners.add(handler);
    void this.start().catch(() => this.#scheduleReconnect());
    return () => void this.#listeners.delete(handler);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#closing.abort();
    clearInterval(this.#cleanupTimer);
    clearTimeout(this.#reconnectTimer);
    await this.#starting?.catch(() => undefined);
    await Promise.all([...this.#pending.values(), ...[...this.#outboxes.values()].map((box) => box.flushing), this.#cleaning]);
    const client = this.#client;
    this.#client = undefined;
    if (client) {
      client.removeAllListeners();
      client.on("error", () => undefined);
      await client.end().catch(() => undefined);
    }
    this.#listeners.clear();
  }
}

function wakeDirty(sub: Subscriber): void {
  sub.dirty = true;
  sub.wake?.();
}

/** The seq of a resume cursor; a malformed one throws as the memory bridge does (parseLastEventId). */
function cursorOf(lastEventId: string | undefined): number | undefined {
  if (lastEventId === undefined) return undefined;
  const match = FRAME_ID.exec(parseLastEventId(lastEventId) ?? "");
  return match ? Number(match[2]) : undefined;
}
