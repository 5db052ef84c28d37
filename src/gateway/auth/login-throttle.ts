import type { KeyValue } from "../../ports/key-value.ts";
import type { Clock } from "../../ports/runtime-ports.ts";
import { addressBucket } from "./client-address.ts";
import { bytesToHex, sha256Bytes } from "../../core/hex.ts";

/*
 * Login throttling: growing delays, never a lock that someone else can put on an account.
 *
 * Three counters of failed sign-ins, each forgotten FORGET_MS after its last failure:
 *   - per client address (an IPv6 address counts as its /64), over every username: after
 *     ADDRESS.free failures each further try waits 1 s, 2 s, 4 s, ... up to ADDRESS.capMs after the
 *     last failure. This is what slows spraying over many usernames from one client.
 *   - per (account, address) pair: after PAIR.free failures, 1 s doubling up to PAIR.capMs. One
 *     client hammering one account is slowed to a few guesses an hour.
 *   - per account, over every address: a global slowdown for guesses spread over many addresses,
 *     bounded and short (doubling up to ACCOUNT.capMs), and applied only to a pair that has already
 *     failed on this account, counted from that pair's own last failure. So an attacker hammering
 *     alice from elsewhere never delays alice's first try from her own address (a correct password
 *     from a client that is not throttled logs in at once), and after a typo she waits at most
 *     ACCOUNT.capMs, counted from her typo, not from the attacker's latest guess.
 * A refused try (429) checks no password and counts nothing, so hammering a refusal does not
 * extend it. A try is counted as a failure before its password is checked, so parallel guesses
 * cannot all slip in under the same count; a success takes its own count back and clears the
 * pair. Unknown usernames are counted like real ones, so the limiter does not reveal which exist.
 *
 * The counters live in the KeyValue (`gateway:auth:throttle:*`, subjects hashed), so a restart
 * does not reset them, with the live values in memory (bounded by MAX_CACHED, reloadable).
 * Forgotten entries are dropped when read and by a sweep at most once per SWEEP_MS.
 */

export const LOGIN_THROTTLE_PREFIX = "gateway:auth:throttle";

interface Limit {
  /** Failures allowed before the first delay. */
  readonly free: number;
  readonly capMs: number;
}

export const ADDRESS_LIMIT: Limit = Object.freeze({ free: 10, capMs: 15 * 60_000 });
export const PAIR_LIMIT: Limit = Object.freeze({ free: 3, capMs: 15 * 60_000 });
export const ACCOUNT_LIMIT: Limit = Object.freeze({ free: 10, capMs: 30_000 });
const FIRST_DELAY_MS = 1000;
export const FORGET_MS = 24 * 3600_000;
const SWEEP_MS = 3600_000;
const MAX_CACHED = 20_000;

interface Counter {
  readonly failures: number;
  /** When the last failure was counted (ms, the gateway's clock). */
  readonly last: number;
}

export type LoginDecision =
  | { readonly allowed: true; readonly attempt: LoginAttempt }
  | {
      readonly allowed: false;
      readonly retryAfterMs: number;
      /** When the next try will be allowed (ms, the gateway's clock). */
      readonly retryAtMs: number;
      /** Which limit refused it: the client's address over every account, or this account from this address. */
      readonly scope: "address" | "account";
    };

export interface LoginAttempt {
  /** The password was right: this try's count is taken back and the pair's failures cleared. */
  succeeded(): Promise<void>;
}

export interface LoginThrottle {
  /** Whether `username` may try a password from `address` now; a try that may is already counted as a failure. */
  begin(username: string, address: string): Promise<LoginDecision>;
}

function delayAfter(failures: number, limit: Limit): number {
  if (failures < limit.free) return 0;
  return Math.min(limit.capMs, FIRST_DELAY_MS * 2 ** Math.min(failures - limit.free, 30));
}

function asCounter(value: unknown): Counter | null {
  if (value === null || typeof value !== "object") return null;
  const { failures, last } = value as Record<string, unknown>;
  if (typeof failures !== "number" || typeof last !== "number" || !Number.isFinite(failures) || !Number.isFinite(last) || failures <= 0) return null;
  return { failures: Math.floor(failures), last };
}

export function createLoginThrottle(options: { readonly storage?: KeyValue; readonly clock: Clock }): LoginThrottle {
  const { storage, clock } = options;
  // Key -> counter (null: known to be empty); what storage holds, plus this process's newer changes.
  const cache = new Map<string, Counter | null>();
  const loading = new Map<string, Promise<void>>();
  const writes = new Map<string, Promise<void>>();
  let lastSweep = clock.now();

  const forgotten = (counter: Counter, now: number) => now - counter.last > FORGET_MS;

  const load = async (key: string): Promise<void> => {
    if (cache.has(key)) return;
    let pending = loading.get(key);
    if (pending === undefined) {
      pending = (async () => {
        const stored = storage === undefined ? null : asCounter(await storage.getItem(key));
        if (!cache.has(key)) cache.set(key, stored);
      })().finally(() => loading.delete(key));
      loading.set(key, pending);
    }
    await pending;
  };

  /** Loads every key; again if a trim evicted one while another was loading. */
  const loadAll = async (keys: readonly string[]): Promise<void> => {
    while (!keys.every((key) => cache.has(key))) await Promise.all(keys.map(load));
  };

  /** Writes the key's current value; writes of one key are chained, so the last one written is the newest. */
  const persist = (key: string): Promise<void> => {
    if (storage === undefined) return Promise.resolve();
    const next = (writes.get(key) ?? Promise.resolve())
      .catch(() => undefined)
      .then(async () => {
        const counter = cache.get(key);
        if (counter === undefined) return;
        if (counter === null) await storage.removeItem(key);
        else await storage.setItem(key, counter);
      });
    writes.set(key, next);
    void next.finally(() => {
      if (writes.get(key) === next) writes.delete(key);
    }).catch(() => undefined);
    return next;
  };

  const current = (key: string, now: number): Counter | null => {
    const counter = cache.get(key) ?? null;
    return counter !== null && forgotten(counter, now) ? null : counter;
  };

  const adjust = (key: string, by: 1 | -1, now: number): void => {
    const counter = current(key, now);
    const failures = (counter?.failures ?? 0) + by;
    cache.set(key, failures <= 0 ? null : { failures, last: by > 0 ? now : (counter?.last ?? now) });
  };

  /**
   * Keeps memory bounded: drops forgotten and empty entries, then the oldest ones (they are in
   * storage and load again; without storage they are forgotten, rather than memory growing without bound).
   */
  const trimCache = (now: number): void => {
    if (cache.size <= MAX_CACHED) return;
    for (const [key, counter] of cache) {
      if (writes.has(key)) continue;
      if (counter === null || forgotten(counter, now)) cache.delete(key);
    }
    for (const key of cache.keys()) {
      if (cache.size <= MAX_CACHED / 2) break;
      if (!writes.has(key)) cache.delete(key);
    }
  };

  /** Drops forgotten counters from storage, at most once per SWEEP_MS, off the login's path. */
  const sweep = (now: number): void => {
    if (storage === undefined || now - lastSweep < SWEEP_MS) return;
    lastSweep = now;
    void (async () => {
      for (const key of await storage.getKeys(LOGIN_THROTTLE_PREFIX)) {
        if (writes.has(key) || loading.has(key)) continue;
        let counter = cache.get(key);
        if (counter === undefined) {
          counter = asCounter(await storage.getItem(key));
          // A try that touched the key meanwhile owns it now.
          if (cache.has(key) || loading.has(key) || writes.has(key)) continue;
        }
        if (counter !== null && !forgotten(counter, clock.now())) continue;
        // Removed through the key's write chain, so a try counted meanwhile is written after it.
        cache.set(key, null);
        await persist(key);
        if (cache.get(key) === null) cache.delete(key);
      }
    })().catch(() => undefined);
  };

  const keyOf = async (kind: string, subject: string) => `${LOGIN_THROTTLE_PREFIX}:${kind}:${bytesToHex(await sha256Bytes(subject)).slice(0, 40)}`;

  return {
    async begin(username, address) {
      const bucket = addressBucket(address);
      const [addressKey, pairKey, accountKey] = await Promise.all([
        keyOf("address", bucket),
        keyOf("pair", `${username}\n${bucket}`),
        keyOf("account", username),
      ]);
      await loadAll([addressKey, pairKey, accountKey]);
      // From here to the counting nothing awaits, so two tries cannot both read the same count.
      const now = clock.now();
      const byAddress = current(addressKey, now);
      const byPair = current(pairKey, now);
      const byAccount = current(accountKey, now);
      const addressWait = byAddress === null ? 0 : byAddress.last + delayAfter(byAddress.failures, ADDRESS_LIMIT) - now;
      const pairDelay = byPair === null ? 0 : Math.max(delayAfter(byPair.failures, PAIR_LIMIT), byAccount === null ? 0 : delayAfter(byAccount.failures, ACCOUNT_LIMIT));
      const pairWait = byPair === null ? 0 : byPair.last + pairDelay - now;
      if (addressWait > 0 || pairWait > 0) {
        const wait = Math.max(addressWait, pairWait);
        return { allowed: false, retryAfterMs: wait, retryAtMs: now + wait, scope: addressWait >= pairWait ? "address" : "account" };
      }
      for (const key of [addressKey, pairKey, accountKey]) adjust(key, 1, now);
      // Counted in storage before the password is checked, so a crash mid-check does not refund it.
      const written = Promise.all([persist(addressKey), persist(pairKey), persist(accountKey)]);
      trimCache(now);
      sweep(now);
      await written;
      return {
        allowed: true,
        attempt: {
          async succeeded() {
            await loadAll([addressKey, pairKey, accountKey]);
            const at = clock.now();
            adjust(addressKey, -1, at);
            adjust(accountKey, -1, at);
            cache.set(pairKey, null);
            await Promise.all([persist(addressKey), persist(pairKey), persist(accountKey)]);
          },
        },
      };
    },
  };
}
