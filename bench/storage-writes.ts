/**
 * storage-writes: how many storage writes, and how many bytes, one demo run costs.
 *
 * Builds the gateway in-process (bench/gateway-app.ts: what `serve` builds from the embedded
 * defaults, demo model, virtual sandbox) over an in-memory KeyValue wrapped by a counting
 * decorator, then runs `--runs` demo runs through gateway.fetch: each creates a thread and streams
 * one run (POST /threads/{id}/runs/stream, values + messages-tuple, read to the end) with
 * bench/soak.ts's "Write a note ..." prompt, which makes the demo model call write_file and bash.
 * Every run is checked (no error frame; the final state holds both tool results and the answer).
 *
 * Counted at the KeyValue (the unstorage Storage every store, the checkpointer, the run journal,
 * the sandbox and the versioned port write through): writes (setItem, setItemRaw, removeItem,
 * one per item of setItems; the versioned port's compare-and-set writes go through setItem and
 * are counted there), bytes written (UTF-8 length of a string, byteLength of bytes, the JSON of
 * anything else), reads (getItem, getItemRaw, hasItem, one per item of getItems) and key listings
 * (getKeys). Everything is also broken down by key prefix (`prefixOf` below: the leading key
 * segments that name a kind of record, with the checkpointer's c/b/w record kinds told apart).
 * The counts of the first (warm-up) run are dropped; the per-run figures are the mean of the rest.
 *
 * Run: npx tsx bench/storage-writes.ts [--runs 5]   (also under deno / bun)
 * Output: one JSON line per measured run, then a summary line with per-run means by prefix.
 */
import "../adapters/shared/als.ts";
import type { KeyValue } from "../src/ports/key-value.ts";
import { createMemoryKeyValue } from "../src/storage/key-value.ts";
import { createBenchGateway, type BenchGateway } from "./gateway-app.ts";
import { checkFinalValues, readFrames } from "./gateway-sse.ts";
import { emit, loadAverage, progressLog, round3, runBench, runtimeInfo } from "./harness.ts";

const log = progressLog("storage-writes");
const encoder = new TextEncoder();
const TOPICS = ["portable runtimes", "edge caching", "stream resumption", "sandbox limits"];

interface Tally {
  writes: number;
  removes: number;
  bytes: number;
  reads: number;
  listings: number;
}

const emptyTally = (): Tally => ({ writes: 0, removes: 0, bytes: 0, reads: 0, listings: 0 });

function sizeOf(value: unknown): number {
  if (value === null || value === undefined) return 0;
  if (typeof value === "string") return encoder.encode(value).byteLength;
  if (value instanceof Uint8Array) return value.byteLength;
  if (value instanceof ArrayBuffer) return value.byteLength;
  return encoder.encode(JSON.stringify(value)).byteLength;
}

const CHECKPOINT_KINDS: Record<string, string> = { c: "checkpoint", b: "blob", w: "write" };

/**
 * The kind of record a key holds: its leading non-id segments. Checkpointer keys
 * (`<prefix>:<thread>:<ns>:<kind>:...`, ids hex-encoded as x.. / y.. pieces) become
 * `<prefix>:<kind>`; other keys keep their segments up to the first that looks like an id.
 */
export function prefixOf(key: string): string {
  const pieces = key.split(/[:/]/).filter((p) => p !== "");
  const named: string[] = [];
  for (let i = 0; i < pieces.length; i++) {
    const piece = pieces[i]!;
    if (/^[xy](?:[0-9a-f]{2})*$/.test(piece)) {
      // A checkpointer key: skip the encoded thread and namespace, then the record kind.
      const kind = pieces.slice(i).find((p) => p in CHECKPOINT_KINDS);
      return [...named, ...(kind === undefined ? [] : [CHECKPOINT_KINDS[kind]!])].join(":");
    }
    const looksLikeId = /[0-9a-f]{8}-[0-9a-f]{4}-/.test(piece) || /\d{6,}/.test(piece) || piece.length > 24 || named.length >= 3;
    if (looksLikeId) break;
    named.push(piece);
  }
  return named.join(":") || "(root)";
}

class Counter {
  total = emptyTally();
  byPrefix = new Map<string, Tally>();

  #at(key: string): Tally {
    const prefix = prefixOf(key);
    let tally = this.byPrefix.get(prefix);
    if (tally === undefined) this.byPrefix.set(prefix, (tally = emptyTally()));
    return tally;
  }

  write(key: string, value: unknown): void {
    const bytes = sizeOf(value);
    for (const t of [this.total, this.#at(key)]) {
      t.writes++;
      t.bytes += bytes;
    }
  }

  remove(key: string): void {
    for (const t of [this.total, this.#at(key)]) {
      t.writes++;
      t.removes++;
    }
  }

  read(key: string): void {
    for (const t of [this.total, this.#at(key)]) t.reads++;
  }

  list(base: string): void {
    for (const t of [this.total, this.#at(base)]) t.listings++;
  }

  reset(): void {
    this.total = emptyTally();
    this.byPrefix = new Map();
  }
}

const keyOf = (item: unknown): string => (typeof item === "string" ? item : String((item as { key: string }).key));

/** A KeyValue that counts every call through it and forwards it unchanged. */
function counting(storage: KeyValue, counter: Counter): KeyValue {
  const wrap: Record<string, (...args: any[]) => unknown> = {
    setItem: (key: string, value: unknown) => counter.write(key, value),
    setItemRaw: (key: string, value: unknown) => counter.write(key, value),
    removeItem: (key: string) => counter.remove(key),
    getItem: (key: string) => counter.read(key),
    getItemRaw: (key: string) => counter.read(key),
    hasItem: (key: string) => counter.read(key),
    getKeys: (base?: string) => counter.list(base ?? ""),
    setItems: (items: Array<{ key: string; value: unknown }>) => {
      for (const item of items) counter.write(item.key, item.value);
    },
    getItems: (items: unknown[]) => {
      for (const item of items) counter.read(keyOf(item));
    },
  };
  return new Proxy(storage, {
    get(target, property, receiver) {
      const original = Reflect.get(target, property, receiver);
      const count = typeof property === "string" ? wrap[property] : undefined;
      if (count === undefined || typeof original !== "function") return original;
      return (...args: unknown[]) => {
        count(...args);
        return (original as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

async function call(gateway: BenchGateway, method: string, path: string, body?: unknown): Promise<Response> {
  return gateway.fetch(
    new Request(`http://127.0.0.1/api${path}`, {
      method,
      headers: { "content-type": "application/json", accept: "text/event-stream" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    }),
  );
}

async function oneRun(gateway: BenchGateway, index: number): Promise<void> {
  const created = await call(gateway, "POST", "/threads", { metadata: {} });
  const threadId = ((await created.json()) as { thread_id: string }).thread_id;
  const topic = TOPICS[index % TOPICS.length]!;
  const response = await call(gateway, "POST", `/threads/${threadId}/runs/stream`, {
    assistant_id: gateway.assistantId,
    input: { messages: [{ role: "user", content: `Write a note about ${topic} (${index}) and count its words.` }] },
    stream_mode: ["values", "messages-tuple"],
  });
  if (!response.ok || response.body === null) throw new Error(`runs/stream answered ${response.status}: ${await response.text()}`);
  let lastValues: string | undefined;
  let errorFrame: string | undefined;
  await readFrames(response.body, (event, data) => {
    if (event === "values") lastValues = data;
    if (event === "error") errorFrame = data;
  });
  if (errorFrame !== undefined) throw new Error(`error frame ${errorFrame.slice(0, 300)}`);
  const problem = checkFinalValues(lastValues);
  if (problem !== null) throw new Error(problem);
}

function parseRuns(argv: readonly string[]): number {
  const at = argv.indexOf("--runs");
  const raw = at >= 0 ? argv[at + 1] : undefined;
  const runs = raw === undefined ? 5 : Number(raw);
  if (!Number.isInteger(runs) || runs < 1) throw new Error(`--runs must be a positive integer, got ${JSON.stringify(raw)}`);
  return runs;
}

const argv: readonly string[] = (globalThis as any).Deno?.args ?? (globalThis as any).process?.argv?.slice(2) ?? [];

runBench("storage-writes", async () => {
  const runs = parseRuns(argv);
  const loadAtStart = loadAverage();
  const counter = new Counter();
  const gateway = await createBenchGateway(counting(createMemoryKeyValue(), counter));
  try {
    await oneRun(gateway, 0); // warm-up: first-use records (secrets, config) are not per-run costs
    // Background work a run leaves behind (journal trimming, snapshot saves) lands before the next count.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const sums = new Map<string, Tally>();
    const total = emptyTally();
    for (let i = 1; i <= runs; i++) {
      counter.reset();
      await oneRun(gateway, i);
      await new Promise((resolve) => setTimeout(resolve, 200));
      emit({ bench: "storage-writes", run: i, ...counter.total });
      for (const [prefix, tally] of counter.byPrefix) {
        const sum = sums.get(prefix) ?? emptyTally();
        for (const field of Object.keys(tally) as Array<keyof Tally>) sum[field] += tally[field];
        sums.set(prefix, sum);
      }
      for (const field of Object.keys(total) as Array<keyof Tally>) total[field] += counter.total[field];
    }
    const mean = (t: Tally): Tally => Object.fromEntries(Object.entries(t).map(([k, v]) => [k, round3(v / runs)])) as unknown as Tally;
    const byPrefix = Object.fromEntries([...sums].sort((a, b) => b[1].writes - a[1].writes).map(([prefix, t]) => [prefix, mean(t)]));
    emit({ bench: "storage-writes", summary: true, runtime: runtimeInfo(), runs, per_run: mean(total), by_prefix: byPrefix, load_avg_1m: { start: loadAtStart, end: loadAverage() } });
    log(`per run: ${JSON.stringify(mean(total))}`);
  } finally {
    await gateway.shutdown();
  }
});
