import pg from "pg";
import { describeServer, passwordOf, toStorageError } from "./errors.ts";

export interface PoolOptions {
  readonly url: string;
  /** Connections this process opens at most (default 10). */
  readonly max?: number;
  /** Told when an idle connection dies (the server restarted, say); default: nothing. */
  readonly onIdleError?: (error: Error) => void;
}

/**
 * A pg.Pool whose failures to reach the server reject with StorageUnavailableError, on
 * `pool.query`, `pool.connect` and the queries of the clients it hands out: so every store on it
 * (KeyValue, compare-and-set, the checkpointer, the run coordinator) answers a lost database the
 * same way, and the gateway turns it into 503. pg's pool drops a dead connection and opens a new
 * one on the next checkout, so the same process serves again once the server is back.
 */
export class StoragePool extends pg.Pool {
  /** host:port (database name), for messages. */
  readonly server: string;
  readonly #secret: string | undefined;
  readonly #map = (error: unknown): never => {
    throw toStorageError(error, this.server, this.#secret);
  };
  readonly #names = new StatementNames();

  constructor(options: PoolOptions) {
    super({ connectionString: options.url, max: options.max ?? 10, connectionTimeoutMillis: 10_000 });
    this.server = describeServer(options.url);
    this.#secret = passwordOf(options.url);
    // Without a listener an idle client's error (57P01 when the server shuts down) is thrown at the
    // process and ends it; the pool already discards that client.
    this.on("error", (error) => options.onIdleError?.(error));
    // An own property over pg-pool's overloaded query(): the promise forms map their failure, the
    // callback forms stay as they are.
    const query = super.query;
    this.query = ((...args: unknown[]) => {
      const result = (query as (...a: unknown[]) => unknown).apply(this, this.#names.name(args));
      return typeof args[args.length - 1] === "function" || !isThenable(result) ? result : result.then(undefined, this.#map);
    }) as typeof this.query;
  }


  override connect(): Promise<pg.PoolClient>;
  override connect(callback: (err: Error | undefined, client: pg.PoolClient | undefined, done: (release?: unknown) => void) => void): void;
  override connect(callback?: (err: Error | undefined, client: pg.PoolClient | undefined, done: (release?: unknown) => void) => void): Promise<pg.PoolClient> | void {
    // pg-pool's own query() checks out with a callback: that path stays as it is.
    if (callback) return super.connect(callback);
    return super.connect().then((client) => this.#wrapClient(client), this.#map);
  }

  #wrapClient(client: pg.PoolClient): pg.PoolClient {
    const marked = client as pg.PoolClient & { [WRAPPED]?: true };
    if (marked[WRAPPED]) return client;
    const query = client.query;
    const map = this.#map;
    const names = this.#names;
    client.query = function (this: pg.PoolClient, ...args: unknown[]) {
      const result = (query as (...a: unknown[]) => unknown).apply(this, names.name(args));
      return isThenable(result) ? result.then(undefined, map) : result;
    } as typeof client.query;
    marked[WRAPPED] = true;
    return client;
  }
}

const WRAPPED = Symbol("deerflow.storageErrors");

/**
 * Gives each distinct parameterised SQL text this pool sends a statement name, so pg prepares it
 * once per connection and then only binds and executes it: PostgreSQL parses it once and, after
 * its fifth execution, may keep a generic plan. Unnamed, every statement was parsed and planned
 * again; per scripted run of bench/cluster.ts (pg_stat_statements, about 54 statements) planning
 * alone was 4.3 ms of the backends' 17.5 ms CPU (1.5 of 11.4 ms named).
 *
 * Only calls of the form query(text, values) are named (a config object keeps its own name or
 * none; a text without values, BEGIN say, gains nothing). The texts come from this package's own
 * SQL, whose few variable parts (rows in a multi-row INSERT, a LIMIT) give a bounded family; past
 * MAX_NAMED distinct texts a new one goes unnamed, so a backend's prepared statements stay
 * bounded. Named statements need a session of their own on the server, which LISTEN/NOTIFY and
 * the advisory locks need already: a direct connection or a session-mode pooler (README).
 */
class StatementNames {
  readonly #names = new Map<string, string>();

  name(args: unknown[]): unknown[] {
    const [text, values] = args;
    if (typeof text !== "string" || !Array.isArray(values)) return args;
    let name = this.#names.get(text);
    if (name === undefined) {
      if (this.#names.size >= MAX_NAMED) return args;
      name = `deerflow_${this.#names.size + 1}`;
      this.#names.set(text, name);
    }
    return [{ name, text, values }, ...args.slice(2)];
  }
}

const MAX_NAMED = 256;

function isThenable(value: unknown): value is Promise<unknown> {
  return typeof (value as { then?: unknown } | null)?.then === "function";
}
