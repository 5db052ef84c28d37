import type { KeyValue } from "../../ports/key-value.ts";
import type { Clock } from "../../ports/runtime-ports.ts";

/*
 * Sessions ended by a logout. Every session token carries a random id (`jti`); logging out records
 * that id with the token's own expiry under `gateway:auth:revoked:<jti>`, written before the logout
 * is answered, and a token whose id is recorded is refused from then on, by this process and by any
 * later one over the same storage. An entry is needed only until its token would have expired
 * anyway, so the list holds at most the sessions ended within the last token lifetime: expired
 * entries are dropped when the list is loaded and by a sweep on a later logout.
 */

export const REVOKED_SESSIONS_PREFIX = "gateway:auth:revoked";
const SWEEP_MS = 60_000;
/** A jti as signSessionToken makes one: base64url, so it is a safe storage key segment. */
const JTI_PATTERN = /^[A-Za-z0-9_-]{16,64}$/;

export interface SessionRevocations {
  isRevoked(jti: string): Promise<boolean>;
  /** Records `jti` as ended until `expiresAtMs` (the token's own expiry), in storage before it resolves. */
  revoke(jti: string, expiresAtMs: number): Promise<void>;
}

export function isSessionId(jti: string): boolean {
  return JTI_PATTERN.test(jti);
}

export function createSessionRevocations(options: { readonly storage?: KeyValue; readonly clock: Clock }): SessionRevocations {
  const { storage, clock } = options;
  const keyOf = (jti: string) => `${REVOKED_SESSIONS_PREFIX}:${jti}`;
  let lastSweep = clock.now();
  // jti -> expiry (ms). Loaded once; this process writes every later change itself.
  let loaded: Promise<Map<string, number>> | undefined;
  const revoked = (): Promise<Map<string, number>> => {
    loaded ??= (async () => {
      const entries = new Map<string, number>();
      if (storage === undefined) return entries;
      const now = clock.now();
      const expired: string[] = [];
      for (const key of await storage.getKeys(REVOKED_SESSIONS_PREFIX)) {
        const jti = key.slice(REVOKED_SESSIONS_PREFIX.length + 1);
        const value = (await storage.getItem<{ exp?: unknown }>(key)) as { exp?: unknown } | null;
        const exp = typeof value?.exp === "number" ? value.exp : 0;
        if (exp > now && isSessionId(jti)) entries.set(jti, exp);
        else expired.push(key);
      }
      await Promise.all(expired.map((key) => storage.removeItem(key)));
      return entries;
    })();
    // A failed storage read must not leave every session unchecked or refused forever.
    loaded.catch(() => {
      loaded = undefined;
    });
    return loaded;
  };

  const sweep = async (entries: Map<string, number>, now: number): Promise<void> => {
    if (now - lastSweep < SWEEP_MS) return;
    lastSweep = now;
    const expired = [...entries].filter(([, exp]) => exp <= now).map(([jti]) => jti);
    for (const jti of expired) entries.delete(jti);
    if (storage !== undefined) await Promise.all(expired.map((jti) => storage.removeItem(keyOf(jti))));
  };

  return {
    async isRevoked(jti) {
      return (await revoked()).has(jti);
    },
    async revoke(jti, expiresAtMs) {
      if (!isSessionId(jti)) return;
      const entries = await revoked();
      const now = clock.now();
      if (expiresAtMs <= now) return;
      entries.set(jti, expiresAtMs);
      await storage?.setItem(keyOf(jti), { exp: expiresAtMs });
      await sweep(entries, now);
    },
  };
}
