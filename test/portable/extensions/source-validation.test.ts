import { describe, expect, it } from "vitest";
import { isSecretQueryKey, validateExtensionSource, type ExtensionSourceKind, type ExtensionSourceRejection } from "../../../src/extensions/manager/source.ts";

const g = globalThis as { Deno?: unknown; Bun?: unknown };
const runtime = g.Deno ? "deno" : g.Bun ? "bun" : "node";

// Every secret in this corpus contains this marker, so "never echoed" is one assertion.
const SECRET = "s3cr3tMARK";

const accepted: ReadonlyArray<readonly [string, ExtensionSourceKind, "warns"?]> = [
  ["deerflow-audit", "registry"],
  ["deerflow-audit@1.2.3", "registry"],
  ["deerflow-audit@^1.2", "registry"],
  ["deerflow-audit@>=1 <2", "registry"],
  ["pkg@>=1", "registry"], // npm's spelling of the scenario's `pkg>=1`
  ["deerflow-audit@latest", "registry"],
  ["@acme/deerflow-audit", "registry"],
  ["@acme/deerflow-audit@2.0.0-beta.1", "registry"],
  ["audit@npm:@acme/deerflow-audit@1", "registry"],
  ["npm:deerflow-audit@1", "registry"],
  ["https://registry.example.com/deerflow-audit-1.0.0.tgz", "url"],
  ["https://example.com/p.tgz?ref=main&keyword=x&subdirectory=pkg", "url"],
  ["git+https://github.com/org/repo.git", "git"],
  ["git+https://github.com/org/repo.git#v1.2.3", "git"],
  ["git+https://github.com/org/repo.git#semver:^1.0", "git"],
  ["deerflow-audit@git+https://github.com/org/repo.git", "git"],
  ["deerflow-audit@https://example.com/p.tgz", "url"],
  ["http://127.0.0.1:8000/p.tgz", "url", "warns"],
  ["http://localhost:4873/p.tgz", "url", "warns"],
  ["http://[::1]:8000/p.tgz", "url", "warns"],
  ["https://127.0.0.1:8443/p.tgz", "url", "warns"],
];

const rejected: ReadonlyArray<readonly [string, ExtensionSourceRejection]> = [
  ["", "empty"],
  ["   ", "empty"],
  ["pkg\n--registry=http://evil", "invalid"],
  // credentials in the URL, in every position
  [`https://user:${SECRET}@host/p.tgz`, "credentials"],
  [`https://${SECRET}@host/p.tgz`, "credentials"],
  [`git+https://x-access-token:${SECRET}@github.com/org/repo.git`, "credentials"],
  [`deerflow-audit@https://user:${SECRET}@host/p.tgz`, "credentials"],
  // secret-looking query and fragment keys
  [`git+https://host/org/repo.git?token=${SECRET}`, "secret_query"],
  [`https://host/p.tgz?accessToken=${SECRET}`, "secret_query"],
  [`https://host/p.tgz?access_token=${SECRET}`, "secret_query"],
  [`https://host/p.tgz?ACCESSTOKEN=${SECRET}`, "secret_query"],
  [`https://host/p.tgz?X-Amz-Signature=${SECRET}&X-Amz-Credential=a`, "secret_query"],
  [`https://host/p.tgz?sig=${SECRET}`, "secret_query"],
  [`https://host/p.tgz?api_key=${SECRET}`, "secret_query"],
  [`https://host/p.tgz?password=${SECRET}`, "secret_query"],
  [`git+https://host/org/repo.git#auth=${SECRET}`, "secret_query"],
  [`http://127.0.0.1:8000/p.tgz?token=${SECRET}`, "secret_query"],
  // git's SCP-like shorthand, detected before any path or scheme rule
  ["git@host:org/repo.git", "scp_shorthand"],
  ["git@github.com:org/repo.git#v1", "scp_shorthand"],
  ["git+git@github.com:org/repo.git", "scp_shorthand"],
  ["deerflow-audit@git@github.com:org/repo.git", "scp_shorthand"],
  // hosted shorthands let npm pick the transport
  ["github:org/repo", "hosted_shorthand"],
  ["gitlab:org/repo", "hosted_shorthand"],
  ["org/repo", "hosted_shorthand"],
  ["deerflow-audit@github:org/repo", "hosted_shorthand"],
  // local paths and tarballs: only folder snapshots enter from this machine
  ["./missing", "local_path"],
  ["../elsewhere/pkg", "local_path"],
  ["/abs/path/pkg", "local_path"],
  ["~/pkg", "local_path"],
  ["C:\\ext\\pkg", "local_path"],
  ["deerflow-audit-1.0.0.tgz", "local_path"],
  ["file:///tmp/p.tgz", "file"],
  ["file:../p", "file"],
  ["deerflow-audit@file:../p", "file"],
  ["git+file:///srv/repo.git", "file"],
  ["ssh://git@host/org/repo.git", "ssh"],
  ["git+ssh://git@github.com/org/repo.git", "ssh"],
  ["http://example.com/p.tgz", "insecure_transport"],
  ["git+http://example.com/org/repo.git", "insecure_transport"],
  ["git://github.com/org/repo.git", "insecure_transport"],
  ["http://10.0.0.5/p.tgz", "insecure_transport"],
  ["ftp://example.com/p.tgz", "unsupported_scheme"],
  ["Not A Package", "invalid"],
  ["deerflow-audit@", "invalid"],
];

describe(`validateExtensionSource (${runtime})`, () => {
  it.each(accepted.map(([source, kind, warns]) => [source, kind, warns ?? "silent"] as const))("accepts %s as %s (%s)", (source, kind, warns) => {
    const check = validateExtensionSource(source);
    expect(check).toMatchObject({ ok: true, kind });
    expect(check.ok && check.warning !== undefined).toBe(warns === "warns");
  });

  it.each(rejected)("rejects %j as %s", (source, category) => {
    const check = validateExtensionSource(source);
    expect(check).toMatchObject({ ok: false, category });
    if (!check.ok) {
      expect(check.message).not.toContain(SECRET);
      expect(check.message.length).toBeGreaterThan(20);
    }
  });

  it("scenario G37: a token query, embedded credentials and the SCP shorthand are rejected without echoing the secret; the shorthand gets the git+https:// correction", () => {
    const token = validateExtensionSource("git+https://host/org/repo.git?token=abc");
    const userinfo = validateExtensionSource("https://user:pw@host/p.tgz");
    const scp = validateExtensionSource("git@host:org/repo.git");
    expect([token, userinfo, scp].map((check) => check.ok)).toEqual([false, false, false]);
    expect(JSON.stringify(token)).not.toContain("abc");
    expect(JSON.stringify(userinfo)).not.toMatch(/user:pw|pw@host/);
    expect(scp.ok ? "" : scp.message).toContain("git+https://host/org/repo.git");
  });

  it("scenario G38: http to a public host, ssh, file and a missing path are rejected; loopback http and a registry range pass", () => {
    for (const source of ["http://example.com/p.tgz", "ssh://git@host/org/repo.git", "file:///tmp/p.tgz", "./missing"]) {
      expect(validateExtensionSource(source).ok, source).toBe(false);
    }
    expect(validateExtensionSource("http://127.0.0.1:8000/p.tgz")).toMatchObject({ ok: true });
    expect(validateExtensionSource("pkg@>=1")).toMatchObject({ ok: true, kind: "registry" });
  });

  it("splits camelCase before matching secret words, so keyword and subdirectory stay installable", () => {
    expect(["token", "accessToken", "access-token", "AUTH", "clientSecret", "X-Amz-Signature", "sessionToken"].map(isSecretQueryKey)).toEqual(
      new Array(7).fill(true),
    );
    expect(["keyword", "subdirectory", "ref", "path", "monkey", "version"].map(isSecretQueryKey)).toEqual(new Array(6).fill(false));
  });
});
