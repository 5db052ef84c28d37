import type { GatewayUserConfig } from "../../config/gateway.ts";
import type { LoginDecision } from "./login-throttle.ts";

/** What `register` hands the auth routes: the credential checks, without the HTTP. */
export interface SessionService {
  readonly tokenLifetimeSeconds: number;
  /** The user when `password` is theirs; null otherwise, after the same amount of work either way. */
  checkPassword(username: string, password: string): Promise<GatewayUserConfig | null>;
  /** Whether `request`'s client may try `username`'s password now (see login-throttle.ts); an allowed try counts as failed until it succeeds. */
  beginLogin(username: string, request: Request): Promise<LoginDecision>;
  issueToken(user: GatewayUserConfig): Promise<string>;
  /** Ends the session of `token` server-side (a logout): it is refused from now on, also after a restart. */
  endSession(token: string): Promise<void>;
}
