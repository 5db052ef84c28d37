import * as v from "valibot";
import { describe, expect, it } from "vitest";
import { GATEWAY_DEFAULTS, GatewayConfigSchema } from "../../../src/config/gateway.ts";

function issues(input: unknown): Array<[string, string]> {
  const result = v.safeParse(GatewayConfigSchema, input);
  if (result.success) return [];
  return result.issues.map((issue) => [v.getDotPath(issue) ?? "", issue.message]);
}

describe("the gateway: section", () => {
  it("defaults to loopback on 2026, auth disabled, 7-day sessions, the upload limits and the request limits", () => {
    expect(GATEWAY_DEFAULTS).toEqual({
      host: "127.0.0.1",
      port: 2026,
      cors_origins: [],
      trusted_proxies: [],
      auth: {
        mode: "disabled",
        api_keys: [],
        users: [],
        jwt_secret_env: "AUTH_JWT_SECRET",
        token_expiry_days: 7,
        internal_token_env: "DEER_FLOW_INTERNAL_AUTH_TOKEN",
        allow_registration: false,
      },
      uploads: { max_files: 10, max_file_bytes: 50 * 1024 * 1024, max_total_bytes: 100 * 1024 * 1024 },
      limits: {
        max_path_bytes: 4096,
        max_path_segments: 64,
        max_path_segment_bytes: 1024,
        max_unauthenticated_body_bytes: 16 * 1024,
        max_run_body_bytes: 4 * 1024 * 1024,
        max_body_bytes: 1024 * 1024,
        max_json_depth: 64,
      },
      workspace_changes: true,
    });
  });

  it("a request limit must be a whole number of 1 or more, and an unknown one is refused", () => {
    expect(issues({ limits: { max_json_depth: 0 } })).toEqual([["limits.max_json_depth", "expected a number >= 1, got 0"]]);
    expect(issues({ limits: { max_body_bytes: 1.5 } })).toEqual([["limits.max_body_bytes", "expected a whole number, got 1.5"]]);
    expect(issues({ limits: { max_body_size: 10 } }).map(([path]) => path)).toEqual(["limits.max_body_size"]);
  });

  it("a mode needs its credentials configured", () => {
    expect(issues({ auth: { mode: "api_key" } })).toEqual([["auth.api_keys", expect.stringContaining("mode api_key needs at least one entry")]]);
    // Session mode may start without config users: the first administrator comes from /api/v1/auth/initialize.
    expect(issues({ auth: { mode: "session" } })).toEqual([]);
    expect(issues({ auth: { mode: "sso" } })[0]).toEqual(["auth.mode", "expected disabled, api_key or session, got \"sso\""]);
  });

  it("secrets never sit in the file: an inline key or a plain password is refused", () => {
    expect(issues({ auth: { api_keys: [{ key: "abc", user_id: "ops" }] } }).map(([path]) => path)).toContain("auth.api_keys.0.key");
    const plain = issues({ auth: { users: [{ id: "u1", password_hash: "hunter2" }] } });
    expect(plain).toEqual([["auth.users.0.password_hash", expect.stringContaining("never store a plain password")]]);
  });

  it("checks ranges, ids and uniqueness with the key's path", () => {
    expect(issues({ auth: { token_expiry_days: 31 } })).toEqual([["auth.token_expiry_days", "expected a number of days from 1 to 30, got 31"]]);
    expect(issues({ auth: { users: [{ id: "../root", password_hash: "pbkdf2-sha256$1000$AAAA$AAAA" }] } })[0]![0]).toBe("auth.users.0.id");
    expect(
      issues({ auth: { users: [{ id: "a", password_hash: "pbkdf2-sha256$1000$AAAA$AAAA" }, { id: "a", password_hash: "pbkdf2-sha256$1000$AAAA$AAAA" }] } }),
    ).toEqual([["auth.users", "every user id must be unique"]]);
    expect(issues({ cors_origins: ["http://localhost:3000/app"] })[0]![0]).toBe("cors_origins.0");
    expect(issues({ uploads: { max_files: 0 } })[0]![0]).toBe("uploads.max_files");
    expect(issues({ port: 70000 })[0]![0]).toBe("port");
    expect(issues({ trusted_proxies: ["127.0.0.1", "::1", "[2001:db8::1]"] })).toEqual([]);
    expect(issues({ trusted_proxies: ["10.0.0.0/8"] })[0]).toEqual(["trusted_proxies.0", 'expected an IP address such as 127.0.0.1 or ::1 (no names, no ranges), got "10.0.0.0/8"']);
    expect(issues({ listen: true })[0]![0]).toBe("listen");
  });
});
