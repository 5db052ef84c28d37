import type { LoginDecision } from "./login-throttle.ts";
import type { PasswordAccount, UserStore } from "./user-store.ts";

/** What `register` hands the auth routes: the credential checks, without the HTTP. */
export interface SessionService {
  readonly tokenLifetimeSeconds: number;
  /** Config users and stored accounts (user-store.ts). */
  readonly accounts: UserStore;
  /** Mode session with storage: /initialize may create the first administrator. */
  readonly accountsCanBeCreated: boolean;
  /** `gateway.auth.allow_registration` with storage, in mode session or disabled: /register is open. */
  readonly registrationEnabled: boolean;
  /** Whether a password login can ever succeed here (config users, or accounts that can be created). */
  readonly passwordLoginAvailable: boolean;
  /** The account when `password` is theirs; null otherwise, after the same amount of work either way. */
  checkPassword(username: string, password: string): Promise<PasswordAccount | null>;
  /** Whether `request`'s client may try `username`'s password now (see login-throttle.ts); an allowed try counts as failed until it succeeds. */
  beginLogin(username: string, request: Request): Promise<LoginDecision>;
  issueToken(user: PasswordAccount): Promise<string>;
  /** Ends the session of `token` server-side (a logout): it is refused from now on, also after a restart. */
  endSession(token: string): Promise<void>;
}
