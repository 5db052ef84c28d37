import { describe, expect, it } from "vitest";
import {
  auditExtensionsLock,
  controlledNpmEnv,
  DISCARDED_NPM_SETTINGS,
  isAtLeast,
  isIgnoredInSnapshot,
  isLikelyCredentialFile,
  managedUse,
  npmOutputTail,
  npmSettingOf,
  readExtensionEntry,
} from "../../src/extensions/manager/index.ts";

function lockWith(packages: Record<string, unknown>, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ name: "deerflow-extensions", lockfileVersion: 3, requires: true, packages: { "": { dependencies: {} }, ...packages }, ...extra });
}

describe("the extensions lock audit", () => {
  it("accepts registry and https references, the managed snapshots and links into them", () => {
    const lock = lockWith({
      "": { dependencies: { a: "1.0.0", snap: "file:sources/snap", "@s/x": "file:sources/@s/x" } },
      "node_modules/a": { version: "1.0.0", resolved: "https://registry.npmjs.org/a/-/a-1.0.0.tgz", integrity: "sha512-x" },
      "node_modules/g": { version: "1.0.0", resolved: "git+https://github.com/org/g.git#0123abc" },
      "node_modules/snap": { version: "1.0.0", resolved: "file:sources/snap" },
      "node_modules/@s/x": { resolved: "sources/@s/x", link: true },
      "sources/@s/x": { name: "@s/x", version: "1.0.0" },
      "node_modules/internal": { version: "1.0.0", resolved: "https://10.0.0.5/internal-1.0.0.tgz" },
    });
    expect(auditExtensionsLock(lock)).toEqual({ violations: [], warnings: [] });
  });

  it("fails absolute paths, file: URLs and relative paths outside the managed snapshots, wherever npm recorded them", () => {
    const lock = lockWith({
      "": { dependencies: { abs: "file:/srv/abs", up: "file:../vendor/up.tgz" } },
      "node_modules/abs": { version: "1.0.0", resolved: "file:/srv/abs" },
      "node_modules/url": { version: "1.0.0", resolved: "file:///srv/url.tgz" },
      "node_modules/win": { version: "1.0.0", resolved: "C:\\\\ext\\\\win" },
      "node_modules/up": { version: "1.0.0", resolved: "file:../vendor/up.tgz" },
      "node_modules/linked": { resolved: "../outside", link: true },
      "../outside": { name: "linked", version: "1.0.0" },
      "node_modules/beside": { version: "1.0.0", resolved: "file:vendor/beside" },
      "node_modules/gitfile": { version: "1.0.0", resolved: "git+file:///srv/repo.git" },
    });
    const { violations } = auditExtensionsLock(lock);
    expect(violations).toEqual([
      "the extensions manifest dependencies.abs resolves to an absolute path (file:/srv/abs)",
      "the extensions manifest dependencies.up resolves to a path outside the extensions folder (file:../vendor/up.tgz)",
      '"node_modules/abs" resolves to an absolute path (file:/srv/abs)',
      '"node_modules/url" resolves to an absolute file: URL (file:///srv/url.tgz)',
      '"node_modules/win" resolves to an absolute path (C:\\\\ext\\\\win)',
      '"node_modules/up" resolves to a path outside the extensions folder (file:../vendor/up.tgz)',
      '"node_modules/linked" resolves to a path outside the extensions folder (../outside)',
      '"../outside" is a path outside the extensions folder',
      '"node_modules/beside" resolves to a local path that is not a managed snapshot under extensions/sources/ (file:vendor/beside)',
      '"node_modules/gitfile" resolves to an absolute file: URL (git+file:///srv/repo.git)',
    ]);
  });

  it("warns about loopback URLs without failing; a private-network index is fine", () => {
    const lock = lockWith({
      "node_modules/local": { version: "1.0.0", resolved: "http://127.0.0.1:4873/local/-/local-1.0.0.tgz" },
      "node_modules/named": { version: "1.0.0", resolved: "https://localhost:8443/named.tgz" },
      "node_modules/private": { version: "1.0.0", resolved: "https://192.168.1.20/private.tgz" },
    });
    expect(auditExtensionsLock(lock)).toEqual({
      violations: [],
      warnings: [
        '"node_modules/local" is fetched from 127.0.0.1:4873, which another machine cannot reach: a clean install elsewhere will not reproduce it',
        '"node_modules/named" is fetched from localhost:8443, which another machine cannot reach: a clean install elsewhere will not reproduce it',
      ],
    });
  });

  it("reads lockfileVersion 1 trees too, and refuses a lock it cannot parse", () => {
    const v1 = JSON.stringify({
      lockfileVersion: 1,
      dependencies: { a: { version: "file:/abs/a", dependencies: { b: { version: "1.0.0", resolved: "file:../b.tgz" } } }, ok: { version: "1.0.0", resolved: "https://r/ok.tgz" } },
    });
    expect(auditExtensionsLock(v1).violations).toEqual([
      '"a" resolves to an absolute path (file:/abs/a)',
      '"a > b" resolves to a path outside the extensions folder (file:../b.tgz)',
    ]);
    expect(auditExtensionsLock("{ not json").violations).toEqual(["package-lock.json is not valid JSON"]);
  });
});

describe("npm's environment", () => {
  it("drops every override that would redirect the project, prefix, lockfile or target, in any letter case and separator", () => {
    const env = controlledNpmEnv({
      PATH: "/usr/bin",
      HOME: "/home/op",
      npm_config_prefix: "/elsewhere",
      NPM_CONFIG_PREFIX: "/elsewhere",
      npm_config_global: "true",
      npm_config_location: "global",
      npm_config_workspace: "w",
      "npm_config_package-lock": "false",
      npm_config_lockfile_version: "1",
      npm_config_save: "false",
      npm_config_dry_run: "true",
      npm_config_omit: "prod",
      npm_config_install_links: "false",
      npm_config_os: "win32",
      npm_config_strict_ssl: "false",
      npm_config_registry: "https://registry.example.com/",
      "npm_config_@acme:registry": "https://acme.example.com/",
      "npm_config_//registry.example.com/:_authToken": "t",
      npm_config_proxy: "http://proxy:3128",
      npm_config_https_proxy: "http://proxy:3128",
      npm_config_cafile: "/etc/ca.pem",
      npm_config_cache: "/var/cache/npm",
      npm_config_userconfig: "/home/op/.npmrc",
      npm_config_ignore_scripts: "true",
    });
    expect(Object.keys(env).sort()).toEqual(
      [
        "HOME",
        "PATH",
        "npm_config_registry",
        "npm_config_@acme:registry",
        "npm_config_//registry.example.com/:_authToken",
        "npm_config_proxy",
        "npm_config_https_proxy",
        "npm_config_cafile",
        "npm_config_cache",
        "npm_config_userconfig",
        "npm_config_ignore_scripts",
      ].sort(),
    );
    expect(npmSettingOf("NPM_CONFIG_LOCKFILE_VERSION")).toBe("lockfile-version");
    expect(npmSettingOf("NODE_ENV")).toBeUndefined();
    for (const kept of ["registry", "proxy", "https-proxy", "noproxy", "cafile", "ca", "cache", "userconfig", "ignore-scripts", "allow-scripts"]) {
      expect(DISCARDED_NPM_SETTINGS.has(kept), kept).toBe(false);
    }
  });

  it("compares versions numerically and shows npm's error lines only", () => {
    expect(isAtLeast("10.0.0", "10.0.0")).toBe(true);
    expect(isAtLeast("10.10.0", "10.9.9")).toBe(true);
    expect(isAtLeast("9.99.99", "10.0.0")).toBe(false);
    expect(isAtLeast("garbage", "10.0.0")).toBe(false);
    expect(
      npmOutputTail({
        stdout: "",
        stderr: "npm warn something\nnpm error code E404\nnpm error 404 Not Found\nnpm error A complete log of this run can be found in: /x\n",
      }),
    ).toBe("npm error code E404\nnpm error 404 Not Found");
  });
});

describe("packaging and snapshot names", () => {
  it("reads the one entry and turns it into a use under extensions/node_modules", () => {
    const entry = readExtensionEntry(JSON.stringify({ name: "@acme/audit", version: "2.0.0", deerflow: { extensions: { audit: "./dist/./lib/../index.js:install" } } }), "package.json");
    expect(entry).toEqual({ packageName: "@acme/audit", version: "2.0.0", name: "audit", modulePath: "dist/index.js", exportName: "install" });
    expect(managedUse("@acme/audit", entry)).toBe("./extensions/node_modules/@acme/audit/dist/index.js:install");
    for (const bad of [" audit", "a\tb", ""]) {
      expect(() => readExtensionEntry(JSON.stringify({ name: "x", deerflow: { extensions: { [bad]: "./i.js:install" } } }), "p"), JSON.stringify(bad)).toThrow(/extension name/);
    }
    for (const target of ["./i.js", "./i.js:1x", "i.js:install", ".\\i.js:install", "./a/../../i.js:install", "./:install"]) {
      expect(() => readExtensionEntry(JSON.stringify({ name: "x", deerflow: { extensions: { a: target } } }), "p"), target).toThrow();
    }
  });

  it("ignores VCS, dependency and cache folders and flags likely credential files", () => {
    expect([".git", "node_modules", ".cache", "x.tsbuildinfo"].every(isIgnoredInSnapshot)).toBe(true);
    expect(["dist", "src", ".github"].some(isIgnoredInSnapshot)).toBe(false);
    expect([".env", ".env.local", "server.pem", "TLS.KEY", "cert.p12", "id_rsa", "id_ed25519", ".npmrc", ".netrc", "credentials.json"].every(isLikelyCredentialFile)).toBe(true);
    expect(["id_rsa.pub", "keys.md", "environment.ts", "package.json"].some(isLikelyCredentialFile)).toBe(false);
  });
});
