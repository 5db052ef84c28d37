// Counts what a pg.Pool sends to the server: statements through pool.query and through the
// clients it checks out, and those checkouts. For tests and benches that pin a statement count.
import type pg from "pg";

export interface PoolCounts {
  readonly statements: number;
  readonly checkouts: number;
  /** The text of each statement, in the order sent. */
  readonly texts: readonly string[];
}

const textOf = (args: readonly unknown[]): string => String((args[0] as { text?: string } | undefined)?.text ?? args[0]);

/** Wraps `pool` in place; the returned object's fields grow as the pool is used. */
export function countPool(pool: pg.Pool): PoolCounts {
  const counts = { statements: 0, checkouts: 0, texts: [] as string[] };
  const query = pool.query.bind(pool) as (...args: unknown[]) => unknown;
  (pool as { query: unknown }).query = (...args: unknown[]) => (counts.statements++, counts.texts.push(textOf(args)), query(...args));
  const wrapped = new WeakSet<pg.PoolClient>();
  const connect = pool.connect.bind(pool) as (...args: unknown[]) => Promise<pg.PoolClient>;
  (pool as { connect: unknown }).connect = async (...args: unknown[]) => {
    // pg-pool's own query() checks out with a callback: counted above as its statement.
    if (args.length > 0) return connect(...args);
    counts.checkouts++;
    const client = await connect();
    // The pool hands the same client out again: wrap it once.
    if (wrapped.has(client)) return client;
    wrapped.add(client);
    const clientQuery = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as { query: unknown }).query = (...args: unknown[]) => (counts.statements++, counts.texts.push(textOf(args)), clientQuery(...args));
    return client;
  };
  return counts;
}
