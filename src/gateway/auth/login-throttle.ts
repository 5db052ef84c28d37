import type { KeyValue } from "../../ports/key-value.ts";
import type { VersionedKeyValue } from "../../ports/versioned-key-value.ts";
import { createMemoryKeyValue } from "../../storage/key-value.ts";
import { CAS_MAX_ATTEMPTS, parseStoredJson, updateVersioned, VersionedConflictError, versionedOver } from "../../storage/versioned.ts";
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
 * does not reset them, and are read there on every try and changed by compare-and-set, so workers
 * sharing a versioned store count together (5 failures spread over two workers are 5, not 2 and 3).
 * Forgotten entries are ignored when read and dropped by a sweep at most once per SWEEP_MS.
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

function parseCounter(text: string | null): Counter | null {
  return asCounter(parseStoredJson(text));
}

export function createLoginThrottle(options: {
  readonly storage?: KeyValue;
  /** Compare-and-set over `storage`'s keys; shared by every worker, it makes the counts theirs together. Default: in-process. */
  readonly versioned?: VersionedKeyValue;
  readonly clock: Clock;
}): LoginThrottle {
  const { clock } = options;
  const storage = options.storage ?? createMemoryKeyValue();
  const versioned = options.versioned ?? versionedOver(storage);
  let lastSweep = clock.now();

  const forgotten = (counter: Counter, now: number) => now - counter.last > FORGET_MS;
  const live = (counter: Counter | null, now: number): Counter | null => (counter !== null && !forgotten(counter, now) ? counter : null);
  const encode = (failures: number, last: number): string | null => (failures <= 0 ? null : JSON.stringify({ failures, last }));

  /** Adds `by` to a counter by compare-and-set, so a count of another worker in between is kept. */
  const adjust = (key: string, by: 1 | -1, now: number): Promise<void | undefined> =>
    updateVersioned(versioned, key, (text) => {
      const counter = live(parseCounter(text), now);
      return { value: encode((counter?.failures ?? 0) + by, by > 0 ? now : (counter?.last ?? now)), result: undefined };
    });

  const clear = (key: string): Promise<void | undefined> => updateVersioned(versioned, key, () => ({ value: null, result: undefined }));

  /** Drops forgotten counters from storage, at most once per SWEEP_MS, off the login's path. */
  const sweep = (now: number): void => {
    if (now - lastSweep < SWEEP_MS) return;
    lastSweep = now;
    void (async () => {
      for (const key of await storage.getKeys(LOGIN_THROTTLE_PREFIX)) {
        // By compare-and-set: a try counted meanwhile (here or on another worker) keeps its counter.
        await updateVersioned(versioned, key, (text) => {
          const counter = parseCounter(text);
          return counter !== null && !forgotten(counter, clock.now()) ? undefined : { value: null, result: undefined };
        });
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
      for (let attempt = 0; attempt < CAS_MAX_ATTEMPTS; attempt++) {
        const [byAddressRead, byPairRead, byAccountRead] = await Promise.all([addressKey, pairKey, accountKey].map((key) => versioned.read(key)));
        const now = clock.now();
        const byAddress = live(parseCounter(byAddressRead!.value), now);
        const byPair = live(parseCounter(byPairRead!.value), now);
        const byAccount = live(parseCounter(byAccountRead!.value), now);
        const addressWait = byAddress === null ? 0 : byAddress.last + delayAfter(byAddress.failures, ADDRESS_LIMIT) - now;
        const pairDelay = byPair === null ? 0 : Math.max(delayAfter(byPair.failures, PAIR_LIMIT), byAccount === null ? 0 : delayAfter(byAccount.failures, ACCOUNT_LIMIT));
        const pairWait = byPair === null ? 0 : byPair.last + pairDelay - now;
        if (addressWait > 0 || pairWait > 0) {
          const wait = Math.max(addressWait, pairWait);
          return { allowed: false, retryAfterMs: wait, retryAtMs: now + wait, scope: addressWait >= pairWait ? "address" : "account" };
        }
        // The address and pair counters guard the decision, each by compare-and-set against the
        // version it was decided on: every try from this address (any account, any worker) changes
        // the first, every try of this account from it the second, so two tries cannot both pass
        // on the same counts. The address is written first; a pair that changed since it was read
        // (a try of the same pair whose address write came just before ours) means this decision
        // used a stale pair count: the address count is taken back and the try decides again on
        // the new counts. Counted before the password is checked, so a crash mid-check does not
        // refund it.
        const counted = await versioned.write(addressKey, encode((byAddress?.failures ?? 0) + 1, now), byAddressRead!.version);
        if (!counted) continue;
        if (!(await versioned.write(pairKey, encode((byPair?.failures ?? 0) + 1, now), byPairRead!.version))) {
          await adjust(addressKey, -1, now);
          continue;
        }
        await adjust(accountKey, 1, now);
        sweep(now);
        return {
          allowed: true,
          attempt: {
            async succeeded() {
              const at = clock.now();
              await Promise.all([adjust(addressKey, -1, at), adjust(accountKey, -1, at), clear(pairKey)]);
            },
          },
        };
      }
      throw new VersionedConflictError(addressKey);
    },
  };
}
