import type { CancelAction } from "./types.ts";

/*
 * The stream bridge as several processes share it (port; implementations: MemoryStreamBridge for
 * one process, PostgreSQL under adapters/shared/postgres, Deno KV under adapters/deno). Frames of a
 * run are readable from any process after a given id, with the same replay window (the newest 256
 * frames of a run), the same `gap` frame for a cursor older than the window, and `end` last; plus
 * signals, best effort (the durable state they announce is the fallback: a worker that missed a
 * cancel finds it at its next lease renewal, a waiting run polls its claim).
 */

export interface StreamFrame {
  /** `<epoch_ms>-<seq>`, seq from 0 per run; absent only on a `gap` frame. */
  readonly id?: string;
  readonly event: string;
  readonly data: unknown;
}

export interface SubscribeOptions {
  /** Resume after this frame id (the SSE `Last-Event-ID`). */
  readonly lastEventId?: string;
  /** Ends the subscription (the reader went away). */
  readonly signal?: AbortSignal;
}

export type BusSignal =
  /** Stop run_id with `action` (its owner acts on it). */
  | { readonly kind: "cancel"; readonly run_id: string; readonly thread_id: string; readonly action: CancelAction }
  /** A run of thread_id released it: the next queued run may claim it. */
  | { readonly kind: "wake"; readonly thread_id: string };

export interface StreamBus {
  /** Starts a run's log, so readers that subscribe before the first frame wait for it. */
  open(runId: string): void | Promise<void>;
  publish(runId: string, event: string, data: unknown): Promise<void>;
  /** Publishes the `end` frame (data null); nothing is published after it. */
  end(runId: string): Promise<void>;
  /** Whether the run's log is still held (readable). */
  has(runId: string): boolean | Promise<boolean>;
  /** As StreamBridge.subscribe (stream-bridge.ts): frames after `lastEventId`, then live ones, ending after `end` or one `gap`. */
  subscribe(runId: string, options?: SubscribeOptions): AsyncIterable<StreamFrame>;
  /** Drops the run's log after `delayMs` (default: the bus's grace, 60 s). */
  release(runId: string, delayMs?: number): void;
  /** Delivers `signal` to every listener in every process (this one included). */
  signal(signal: BusSignal): Promise<void>;
  /** Calls `handler` for every signal; returns the unsubscribe. */
  listen(handler: (signal: BusSignal) => void): () => void;
  close(): Promise<void>;
}

/**
 * Signals within one process: every listener is called at once, in the order they started
 * listening; a throwing listener keeps the signal from no other.
 */
export class LocalSignals {
  readonly #listeners = new Set<(signal: BusSignal) => void>();

  async signal(signal: BusSignal): Promise<void> {
    for (const listener of [...this.#listeners]) {
      try {
        listener(signal);
      } catch {
        // A broken listener is its owner's problem, not the sender's.
      }
    }
  }

  listen(handler: (signal: BusSignal) => void): () => void {
    // A wrapper per call, so a handler that listens twice is unsubscribed once per listen.
    const listener = (signal: BusSignal) => handler(signal);
    this.#listeners.add(listener);
    return () => void this.#listeners.delete(listener);
  }

  clear(): void {
    this.#listeners.clear();
  }
}
