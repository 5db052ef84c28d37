// A deep path costs the sandbox a logarithmic number of file system calls, whatever its depth: the
// file API asked realpath and lstat once per missing level (each linear or worse in the path's
// length), so a 2,000-level missing artifact path held the event loop for tens of seconds.
import type { InMemoryFs } from "just-bash";
import { afterEach, describe, expect, it } from "vitest";
import { SandboxError, VIRTUAL_DIRS } from "../../src/ports/sandbox.ts";
import type { Sandbox, SandboxProvider } from "../../src/ports/sandbox.ts";
import { createVirtualSandboxProvider } from "../../src/sandbox/virtual.ts";

const providers: SandboxProvider[] = [];
afterEach(async () => {
  await Promise.all(providers.splice(0).map((p) => p.close()));
});

/** The virtual sandbox with every InMemoryFs lookup counted. */
async function countedSandbox(): Promise<{ sandbox: Sandbox; calls: () => number; reset: () => void }> {
  const provider = createVirtualSandboxProvider();
  providers.push(provider);
  const sandbox = await provider.acquire({ userId: "alice", threadId: "thread-1" });
  const fs = (sandbox as unknown as { fs: InMemoryFs }).fs;
  let count = 0;
  for (const name of ["realpath", "lstat", "stat"] as const) {
    const original = fs[name].bind(fs) as (path: string) => Promise<unknown>;
    (fs as unknown as Record<string, unknown>)[name] = (path: string) => {
      count++;
      return original(path);
    };
  }
  return { sandbox, calls: () => count, reset: () => void (count = 0) };
}

const deep = (root: string, levels: number, name = "a") => `${root}/${Array.from({ length: levels }, () => name).join("/")}`;

async function errorCode(promise: Promise<unknown>): Promise<string | undefined> {
  try {
    await promise;
    return undefined;
  } catch (error) {
    expect(error).toBeInstanceOf(SandboxError);
    return (error as SandboxError).code;
  }
}

describe("deep paths in the virtual sandbox", () => {
  it("a 500-level missing path is not found after a few lookups, not two per level", async () => {
    const { sandbox, calls } = await countedSandbox();
    const path = deep(VIRTUAL_DIRS.outputs, 500);
    expect(await errorCode(sandbox.readFileBytes(path))).toBe("not_found");
    expect(await sandbox.exists(path)).toBe(false);
    expect(await errorCode(sandbox.list(path))).toBe("not_found");
    // Three calls, each at most a gallop down the chain and a binary search back (2 log2(505) + 2).
    expect(calls()).toBeLessThan(3 * 25);
  });

  it("a path 200 levels below a deep existing folder resolves in a logarithmic number of lookups and reads back", async () => {
    const { sandbox, calls, reset } = await countedSandbox();
    const folder = deep(VIRTUAL_DIRS.workspace, 300, "d");
    await sandbox.writeFile(`${folder}/note.txt`, "deep");
    reset();
    expect(await sandbox.readFile(`${folder}/note.txt`)).toBe("deep");
    expect(await errorCode(sandbox.readFile(deep(`${folder}/missing`, 200)))).toBe("not_found");
    expect(calls()).toBeLessThan(2 * 22);
  });
});
