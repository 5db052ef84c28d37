import * as v from "valibot";
import { DeerflowError } from "../../core/errors.ts";
import { newId } from "../../core/ids.ts";
import { GATEWAY_USER_ROLES, PASSWORD_HASH_PATTERN, USER_ID_PATTERN, type GatewayUserConfig, type GatewayUserRole } from "../../config/gateway.ts";
import type { VersionedKeyValue } from "../../ports/versioned-key-value.ts";
import type { Clock } from "../../ports/runtime-ports.ts";
import { parseStoredJson, updateVersioned } from "../../storage/versioned.ts";

/*
 * Accounts created through the API (/initialize, /register), kept in storage next to the ones
 * config.yaml declares. All of them live in one record, `gateway:auth:users`, written by
 * compare-and-set: "no administrator exists yet" and "this email is free" are checked against the
 * record as it is when written, so two workers can neither both create the first administrator
 * nor the same account. Passwords are PBKDF2 hashes (password.ts); the record never holds one in
 * the clear. A user's login names are their email and, for a config user, their id; one name
 * opens at most one account, compared without case.
 */

export const USER_RECORDS_KEY = "gateway:auth:users";
/** Shown as the email of a config user that declares none (`.localdomain`: never a real mailbox). */
export const SYNTHETIC_EMAIL_DOMAIN = "localhost.localdomain";

/** An account that can sign in with a password, wherever it is declared. */
export interface PasswordAccount {
  readonly id: string;
  readonly email: string;
  readonly role: GatewayUserRole;
  readonly password_hash: string;
  readonly token_version: number;
  /** `config`: declared in config.yaml, changed only there. */
  readonly source: "config" | "storage";
}

const StoredAccountSchema = v.object({
  id: v.pipe(v.string(), v.regex(USER_ID_PATTERN)),
  email: v.pipe(v.string(), v.minLength(3)),
  role: v.picklist(GATEWAY_USER_ROLES),
  password_hash: v.pipe(v.string(), v.regex(PASSWORD_HASH_PATTERN)),
  token_version: v.pipe(v.number(), v.integer(), v.minValue(0)),
  created_at: v.string(),
  updated_at: v.optional(v.string()),
});
type StoredAccount = v.InferOutput<typeof StoredAccountSchema>;

const RecordSchema = v.object({ version: v.literal(1), users: v.array(StoredAccountSchema) });

export type UserStoreRefusal = "admin_exists" | "email_taken" | "not_found" | "password_changed";

export type UserStoreResult = { readonly account: PasswordAccount } | { readonly refusal: UserStoreRefusal };

export interface UserStore {
  /** The config user or stored account `name` (an id or an email, any case) signs in as. */
  findByLoginName(name: string): Promise<PasswordAccount | undefined>;
  findById(id: string): Promise<PasswordAccount | undefined>;
  /** Whether any administrator exists, in config.yaml or in storage. */
  hasAdministrator(): Promise<boolean>;
  /**
   * A new stored account. `firstAdministrator`: only while no administrator exists anywhere
   * (refusal `admin_exists` otherwise). The email must not be any account's login name.
   */
  create(input: { readonly email: string; readonly passwordHash: string; readonly role: GatewayUserRole; readonly firstAdministrator?: boolean }): Promise<UserStoreResult>;
  /**
   * A stored account's new password (and email), its token_version raised so every earlier
   * session is refused. `expectedHash`: the hash the current password was checked against; a
   * change in between (another worker's) is refused as `password_changed`.
   */
  changePassword(id: string, input: { readonly expectedHash: string; readonly passwordHash: string; readonly email?: string }): Promise<UserStoreResult>;
}

const emptyRecord = (): v.InferOutput<typeof RecordSchema> => ({ version: 1, users: [] });

function malformed(): DeerflowError {
  return new DeerflowError(
    "user_records_malformed",
    `The stored accounts at "${USER_RECORDS_KEY}" are not a deerflow-edge user record, so they were left untouched; fix or restore the record.`,
    { details: { status: 500 } },
  );
}

function parseRecord(text: string | null): v.InferOutput<typeof RecordSchema> {
  const raw = parseStoredJson(text);
  if (raw === null) return emptyRecord();
  const parsed = v.safeParse(RecordSchema, raw);
  if (!parsed.success) throw malformed();
  return parsed.output;
}

const nameKey = (name: string): string => name.trim().toLowerCase();

export function configAccount(user: GatewayUserConfig): PasswordAccount {
  return Object.freeze({
    id: user.id,
    email: user.email ?? `${user.id}@${SYNTHETIC_EMAIL_DOMAIN}`,
    role: user.role,
    password_hash: user.password_hash,
    token_version: user.token_version,
    source: "config",
  });
}

function storedAccount(user: StoredAccount): PasswordAccount {
  return Object.freeze({ id: user.id, email: user.email, role: user.role, password_hash: user.password_hash, token_version: user.token_version, source: "storage" });
}

export function createUserStore(options: {
  readonly configUsers: readonly GatewayUserConfig[];
  /** Absent: no account can be created, and only config users sign in. */
  readonly versioned: VersionedKeyValue | undefined;
  readonly clock: Clock;
}): UserStore {
  const { versioned, clock } = options;
  const configById = new Map<string, PasswordAccount>();
  const configByName = new Map<string, PasswordAccount>();
  for (const user of options.configUsers) {
    const account = configAccount(user);
    configById.set(user.id, account);
    configByName.set(nameKey(user.id), account);
    configByName.set(nameKey(account.email), account);
  }
  const configAdmin = options.configUsers.some((user) => user.role === "admin");

  const stored = async (): Promise<StoredAccount[]> => {
    if (versioned === undefined) return [];
    return parseRecord((await versioned.read(USER_RECORDS_KEY)).value).users;
  };
  // Taken by another account: a config login name, or a stored email (ids are random, never typed in).
  const taken = (users: readonly StoredAccount[], email: string, except?: string): boolean =>
    configByName.has(nameKey(email)) || users.some((user) => user.id !== except && nameKey(user.email) === nameKey(email));

  const write = async (change: (users: StoredAccount[]) => StoredAccount[] | UserStoreRefusal, pick: (users: StoredAccount[]) => StoredAccount | undefined): Promise<UserStoreResult> => {
    if (versioned === undefined) return { refusal: "not_found" };
    const result = await updateVersioned<UserStoreResult>(versioned, USER_RECORDS_KEY, (text) => {
      const record = parseRecord(text);
      const next = change(record.users);
      if (typeof next === "string") return { value: text, result: { refusal: next } };
      const account = pick(next);
      if (account === undefined) return { value: text, result: { refusal: "not_found" } };
      return { value: JSON.stringify({ version: 1, users: next }), result: { account: storedAccount(account) } };
    });
    return result ?? { refusal: "not_found" };
  };

  return {
    async findByLoginName(name) {
      const fromConfig = configByName.get(nameKey(name));
      if (fromConfig !== undefined) return fromConfig;
      const user = (await stored()).find((entry) => nameKey(entry.email) === nameKey(name));
      return user === undefined ? undefined : storedAccount(user);
    },
    async findById(id) {
      const fromConfig = configById.get(id);
      if (fromConfig !== undefined) return fromConfig;
      const user = (await stored()).find((entry) => entry.id === id);
      return user === undefined ? undefined : storedAccount(user);
    },
    async hasAdministrator() {
      return configAdmin || (await stored()).some((user) => user.role === "admin");
    },
    create(input) {
      let id: string;
      do id = newId("user");
      while (configById.has(id));
      const now = new Date(clock.now()).toISOString();
      return write(
        (users) => {
          if (input.firstAdministrator === true && (configAdmin || users.some((user) => user.role === "admin"))) return "admin_exists";
          if (taken(users, input.email)) return "email_taken";
          return [...users, { id, email: input.email.trim(), role: input.role, password_hash: input.passwordHash, token_version: 0, created_at: now }];
        },
        (users) => users.find((user) => user.id === id),
      );
    },
    changePassword(id, input) {
      const now = new Date(clock.now()).toISOString();
      return write(
        (users) => {
          const user = users.find((entry) => entry.id === id);
          if (user === undefined) return "not_found";
          if (user.password_hash !== input.expectedHash) return "password_changed";
          if (input.email !== undefined && taken(users, input.email, id)) return "email_taken";
          const changed: StoredAccount = {
            ...user,
            ...(input.email === undefined ? {} : { email: input.email.trim() }),
            password_hash: input.passwordHash,
            token_version: user.token_version + 1,
            updated_at: now,
          };
          return users.map((entry) => (entry.id === id ? changed : entry));
        },
        (users) => users.find((user) => user.id === id),
      );
    },
  };
}
