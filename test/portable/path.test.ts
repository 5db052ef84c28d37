import { describe, expect, it } from "vitest";
import { isInsideVirtualRoots, normalizePosixPath } from "../../src/core/path.ts";
import { resolveVirtualPath } from "../../src/sandbox/virtual-path.ts";
import { SandboxError } from "../../src/ports/sandbox.ts";

const W = "/mnt/user-data/workspace";

function refusal(fn: () => unknown): SandboxError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(SandboxError);
    return error as SandboxError;
  }
  throw new Error("expected a SandboxError");
}

describe("normalizePosixPath", () => {
  it.each([
    ["/a//b/./c/", "/a/b/c"],
    ["/a/b/../c", "/a/c"],
    ["/../../x", "/x"],
    ["/", "/"],
    ["a/./b/..", "a"],
    ["../a", "../a"],
    ["a/../..", ".."],
    ["", "."],
  ])("%j -> %j", (input, expected) => {
    expect(normalizePosixPath(input)).toBe(expected);
  });
});

describe("isInsideVirtualRoots", () => {
  it("accepts the three roots and paths below them", () => {
    for (const p of [W, "/mnt/user-data/uploads", "/mnt/user-data/outputs/", `${W}/a/b.txt`, `${W}/a/../b`]) {
      expect(isInsideVirtualRoots(p), p).toBe(true);
    }
  });
  it("rejects everything else", () => {
    for (const p of ["/mnt/user-data", "/mnt/user-data/other", "/mnt/user-data/workspacex", `${W}/../../etc`, "/etc/passwd", "workspace", `${W}/a\0`]) {
      expect(isInsideVirtualRoots(p), p).toBe(false);
    }
  });
});

describe("resolveVirtualPath", () => {
  it("refuses a path longer than 4096 bytes once resolved, showing only its start", () => {
    const longest = `${W}/${"d".repeat(4096 - W.length - 1)}`;
    expect(resolveVirtualPath(longest)).toBe(longest);
    const over = refusal(() => resolveVirtualPath(`${longest}x`));
    expect(over.code).toBe("path_outside_sandbox");
    expect(over.message).toContain("longer than the 4096 bytes");
    expect(over.message.length).toBeLessThan(600);
    // Bytes, not characters: 2,000 euro signs (three bytes each) are 6,000 bytes.
    expect(refusal(() => resolveVirtualPath("€".repeat(2000))).message).toContain("4096 bytes");
    // What resolves short is fine, however long it was written.
    expect(resolveVirtualPath(`${"./".repeat(5000)}a.txt`)).toBe(`${W}/a.txt`);
  });

  it("resolves absolute and relative paths against the workspace or a cwd", () => {
    expect(resolveVirtualPath(`${W}/a/./b/../c.txt`)).toBe(`${W}/a/c.txt`);
    expect(resolveVirtualPath("notes.md")).toBe(`${W}/notes.md`);
    expect(resolveVirtualPath("./x/../y")).toBe(`${W}/y`);
    expect(resolveVirtualPath("")).toBe(W);
    expect(resolveVirtualPath("../outputs/r.md")).toBe("/mnt/user-data/outputs/r.md");
    expect(resolveVirtualPath("r.md", "/mnt/user-data/outputs")).toBe("/mnt/user-data/outputs/r.md");
    expect(resolveVirtualPath("/mnt/user-data/uploads")).toBe("/mnt/user-data/uploads");
  });

  it.each([
    "/mnt/user-data/workspace/../../etc/passwd",
    "/etc/passwd",
    "../../etc/passwd",
    "..",
    "../..",
    "/mnt/user-data",
    "/mnt/user-data/workspacex/a",
    "/mnt/user-data/workspace/a\0b",
    "/",
  ])("refuses %j naming the path and the allowed roots", (path) => {
    const error = refusal(() => resolveVirtualPath(path));
    expect(error.code).toBe("path_outside_sandbox");
    expect(error.message).toContain(JSON.stringify(path.replaceAll("\0", "\\0")));
    for (const root of [W, "/mnt/user-data/uploads", "/mnt/user-data/outputs"]) expect(error.message).toContain(root);
  });

  it("says where a climbing path lands", () => {
    expect(refusal(() => resolveVirtualPath("../../etc/passwd")).message).toContain('resolves to "/mnt/etc/passwd"');
  });

  it("refuses a cwd outside the roots", () => {
    expect(refusal(() => resolveVirtualPath("a", "/tmp")).code).toBe("path_outside_sandbox");
  });
});
