// One contract, every sandbox kind, every runtime (Node, Deno, Bun).
import { lstat, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { InMemoryFs } from "just-bash";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createFsKeyValue } from "../../adapters/shared/fs-key-value.ts";
import { createLocalSandboxProvider } from "../../adapters/shared/local-sandbox.ts";
import type { KeyValue } from "../../src/ports/key-value.ts";
import { SandboxError, VIRTUAL_DIRS } from "../../src/ports/sandbox.ts";
import type { Sandbox, SandboxProvider, SandboxScope } from "../../src/ports/sandbox.ts";
import { createMemoryKeyValue } from "../../src/storage/key-value.ts";
import { createVirtualSandboxProvider } from "../../src/sandbox/virtual.ts";
import { runtimeSandboxWorkers } from "./sandbox-workers.ts";
import { currentRunner, runtime } from "./current-runner.ts";

const W = VIRTUAL_DIRS.workspace;
const ALICE: SandboxScope = { userId: "alice", threadId: "thread-1" };
const ALICE_2: SandboxScope = { userId: "alice", threadId: "thread-2" };
const BOB: SandboxScope = { userId: "bob", threadId: "thread-1" };


async function hostTree(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string, prefix: string) => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      out.push(`${prefix}${e.name}${e.isDirectory() ? "/" : ""}`);
      if (e.isDirectory()) await walk(join(d, e.name), `${prefix}${e.name}/`);
    }
  };
  await walk(dir, "");
  return out.sort();
}

/** What the shared suite needs beyond the port: a way to plant symlinks and look behind the sandbox. */
interface Harness {
  provider: SandboxProvider;
  /** Makes `<workspace>/<name>` a link to a directory outside user-data holding secret.txt. */
  plantEscapeLink(sandbox: Sandbox, name: string): Promise<{ outsideHas(file: string): Promise<boolean> }>;
  /** Makes `<workspace>/<name>` a link to a missing file outside user-data. */
  plantDanglingLink(sandbox: Sandbox, name: string): Promise<{ targetExists(): Promise<boolean> }>;
  /** Makes `<workspace>/<name>` a link to the outputs dir (allowed). */
  plantInsideLink(sandbox: Sandbox, name: string): Promise<void>;
  /** Writes raw bytes (not text) to a virtual path behind the sandbox's back. */
  plantBytes(sandbox: Sandbox, virtualPath: string, bytes: Uint8Array): Promise<void>;
  /** Everything that exists outside the sandbox's roots, to prove an escape left no trace. */
  outsideState(sandbox: Sandbox): Promise<string>;
  /** A fresh provider over the same persistent state (files of released sandboxes must come back). */
  reopen?(): SandboxProvider;
  cleanup(): Promise<void>;
}

async function expectOutside(promise: Promise<unknown>, shown?: string): Promise<SandboxError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error, `expected a refusal${shown ? ` for ${JSON.stringify(shown)}` : ""}`).toBeInstanceOf(SandboxError);
  const sandboxError = error as SandboxError;
  expect(sandboxError.code).toBe("path_outside_sandbox");
  expect(sandboxError.message).toContain(W);
  expect(sandboxError.message).toContain(VIRTUAL_DIRS.outputs);
  return sandboxError;
}

async function expectCode(promise: Promise<unknown>, code: SandboxError["code"]): Promise<void> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(SandboxError);
  expect((error as SandboxError).code).toBe(code);
}

const ESCAPES = [
  "/mnt/user-data/workspace/../../etc/passwd",
  "/etc/passwd",
  "../../etc/passwd",
  "../escaped.txt",
  "sub/../../../escaped.txt",
  "/mnt/user-data",
  "/mnt/user-data/escaped.txt",
  "/mnt/user-data/workspacex/escaped.txt",
  "/mnt/user-data/workspace/a\0b.txt",
  "/",
];

/** `reopens`: the harness offers `reopen` (its state outlives a provider), so the durability case runs. */
function sandboxContract(name: string, makeHarness: () => Promise<Harness>, opts: { kind: "virtual" | "local"; reopens: boolean }) {
  describe(`sandbox contract: ${name} (${runtime})`, () => {
    let h: Harness;
    beforeEach(async () => {
      h = await makeHarness();
    });
    afterEach(async () => {
      await h.provider.close();
      await h.cleanup();
    });

    it("reports its kind", () => {
      expect(h.provider.kind).toBe(opts.kind);
    });

    it("exec: echo, pipes and exit codes", async () => {
      const sb = await h.provider.acquire(ALICE);
      expect(await sb.exec("echo hello")).toEqual({ stdout: "hello\n", stderr: "", exitCode: 0 });
      expect((await sb.exec("printf 'b\\na\\nc\\n' | sort | head -n 2")).stdout).toBe("a\nb\n");
      expect((await sb.exec("exit 3")).exitCode).toBe(3);
      expect((await sb.exec("false")).exitCode).toBe(1);
      const missing = await sb.exec("no-such-command-xyz");
      expect(missing.exitCode).toBe(127);
      expect(missing.stderr).toContain("no-such-command-xyz");
      expect(await sb.exec("echo oops >&2; exit 2")).toMatchObject({ stderr: "oops\n", exitCode: 2 });
    });

    it("exec runs in the workspace by default, in a virtual cwd when asked, and shows virtual paths", async () => {
      const sb = await h.provider.acquire(ALICE);
      expect((await sb.exec("pwd")).stdout).toBe(`${W}\n`);
      expect((await sb.exec("pwd", { cwd: VIRTUAL_DIRS.outputs })).stdout).toBe(`${VIRTUAL_DIRS.outputs}\n`);
      expect((await sb.exec("echo /mnt/user-data/uploads/x")).stdout).toBe("/mnt/user-data/uploads/x\n");
      await expectOutside(sb.exec("pwd", { cwd: "/etc" }), "/etc");
      await expectOutside(sb.exec("pwd", { cwd: "../.." }), "../..");
      await expectCode(sb.exec("pwd", { cwd: `${W}/missing-dir` }), "not_found");
    });

    it("exec and the file API see the same files", async () => {
      const sb = await h.provider.acquire(ALICE);
      await sb.writeFile("/mnt/user-data/uploads/in.txt", "from api\n");
      expect((await sb.exec("cat /mnt/user-data/uploads/in.txt")).stdout).toBe("from api\n");
      const r = await sb.exec("mkdir -p /mnt/user-data/outputs/r && echo from-shell > /mnt/user-data/outputs/r/out.txt");
      expect(r.exitCode).toBe(0);
      expect(await sb.readFile("/mnt/user-data/outputs/r/out.txt")).toBe("from-shell\n");
    });

    it("exec does not see the host process environment", async () => {
      const sb = await h.provider.acquire(ALICE);
      const env = (globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env;
      if (env) env.DEERFLOW_EDGE_CONTRACT_SECRET = "leaked";
      try {
        expect((await sb.exec("echo ${DEERFLOW_EDGE_CONTRACT_SECRET:-none}")).stdout).toBe("none\n");
      } finally {
        if (env) delete env.DEERFLOW_EDGE_CONTRACT_SECRET;
      }
    });

    it("write then read, overwrite, append, parents created", async () => {
      const sb = await h.provider.acquire(ALICE);
      await sb.writeFile(`${W}/deep/er/notes.md`, "one\n");
      expect(await sb.readFile(`${W}/deep/er/notes.md`)).toBe("one\n");
      await sb.writeFile(`${W}/deep/er/notes.md`, "two\n");
      expect(await sb.readFile(`${W}/deep/er/notes.md`)).toBe("two\n");
      await sb.writeFile(`${W}/deep/er/notes.md`, "three\n", { append: true });
      expect(await sb.readFile(`${W}/deep/er/notes.md`)).toBe("two\nthree\n");
      await sb.writeFile(`${W}/new.txt`, "née ✓\n", { append: true });
      expect(await sb.readFile(`${W}/new.txt`)).toBe("née ✓\n");
      await sb.writeFile(`${W}/empty.txt`, "");
      expect(await sb.readFile(`${W}/empty.txt`)).toBe("");
    });

    it("reading a missing file or a directory, and writing onto a directory, fail with their codes", async () => {
      const sb = await h.provider.acquire(ALICE);
      await expectCode(sb.readFile(`${W}/nope.txt`), "not_found");
      await expectCode(sb.readFile(W), "is_directory");
      await sb.writeFile(`${W}/d/f.txt`, "x");
      await expectCode(sb.writeFile(`${W}/d`, "x"), "is_directory");
      expect(await sb.readFile(`${W}/d/f.txt`)).toBe("x");
      await expectCode(sb.list(`${W}/nope`), "not_found");
    });

    it("readFileBytes returns a file's exact bytes, binary or text, as a plain Uint8Array", async () => {
      const sb = await h.provider.acquire(ALICE);
      const binary = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0xff, 0xfe, 0x80, 0xc3];
      await h.plantBytes(sb, "/mnt/user-data/uploads/img.png", new Uint8Array(binary));
      const bytes = await sb.readFileBytes("/mnt/user-data/uploads/img.png");
      expect(Object.getPrototypeOf(bytes)).toBe(Uint8Array.prototype);
      expect([...bytes]).toEqual(binary);
      await sb.writeFile(`${W}/t.txt`, "née ✓\n");
      expect([...(await sb.readFileBytes("t.txt"))]).toEqual([...new TextEncoder().encode("née ✓\n")]);
      await sb.writeFile(`${W}/empty.bin`, "");
      expect((await sb.readFileBytes(`${W}/empty.bin`)).length).toBe(0);
    });

    it("readFileBytes hands out a copy: writing into it leaves the file alone", async () => {
      const sb = await h.provider.acquire(ALICE);
      await h.plantBytes(sb, `${W}/a.bin`, new Uint8Array([1, 2, 3]));
      const first = await sb.readFileBytes(`${W}/a.bin`);
      first[0] = 9;
      expect([...(await sb.readFileBytes(`${W}/a.bin`))]).toEqual([1, 2, 3]);
    });

    it("readFileBytes fails like readFile on a missing file, a directory and a released sandbox", async () => {
      const sb = await h.provider.acquire(ALICE);
      await expectCode(sb.readFileBytes(`${W}/nope.png`), "not_found");
      await expectCode(sb.readFileBytes(VIRTUAL_DIRS.uploads), "is_directory");
      await h.provider.release(sb.id);
      await expectCode(sb.readFileBytes(`${W}/nope.png`), "sandbox_unavailable");
    });

    it("writeFileBytes stores exact bytes, replaces a file, creates parents and keeps no reference to the caller's buffer", async () => {
      const sb = await h.provider.acquire(ALICE);
      const binary = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x00, 0xff, 0xfe, 0x80, 0xc3, 0x0a]);
      await sb.writeFileBytes("/mnt/user-data/uploads/deep/img.png", binary);
      binary[0] = 0;
      expect([...(await sb.readFileBytes("/mnt/user-data/uploads/deep/img.png"))]).toEqual([0x89, 0x50, 0x4e, 0x47, 0x00, 0xff, 0xfe, 0x80, 0xc3, 0x0a]);
      expect((await sb.exec("wc -c < /mnt/user-data/uploads/deep/img.png")).stdout.trim()).toBe("10");
      await sb.writeFileBytes("/mnt/user-data/uploads/deep/img.png", new Uint8Array([7]));
      expect([...(await sb.readFileBytes("/mnt/user-data/uploads/deep/img.png"))]).toEqual([7]);
      await sb.writeFileBytes("rel.txt", new TextEncoder().encode("née ✓\n"));
      expect(await sb.readFile(`${W}/rel.txt`)).toBe("née ✓\n");
      await sb.writeFileBytes(`${W}/empty.bin`, new Uint8Array(0));
      expect((await sb.readFileBytes(`${W}/empty.bin`)).length).toBe(0);
      // Nothing but the files themselves: no staging leftovers beside them.
      expect(await sb.list(VIRTUAL_DIRS.uploads, { depth: 3 })).toEqual([
        { path: "/mnt/user-data/uploads/deep", name: "deep", type: "directory" },
        { path: "/mnt/user-data/uploads/deep/img.png", name: "img.png", type: "file", size: 1 },
      ]);
    });

    it("writeFileBytes fails like writeFile onto a directory and on a released sandbox", async () => {
      const sb = await h.provider.acquire(ALICE);
      await sb.writeFile(`${W}/d/f.txt`, "x");
      await expectCode(sb.writeFileBytes(`${W}/d`, new Uint8Array([1])), "is_directory");
      await expectCode(sb.writeFileBytes(VIRTUAL_DIRS.uploads, new Uint8Array([1])), "is_directory");
      expect(await sb.readFile(`${W}/d/f.txt`)).toBe("x");
      await h.provider.release(sb.id);
      await expectCode(sb.writeFileBytes(`${W}/n.bin`, new Uint8Array([1])), "sandbox_unavailable");
    });

    it("remove deletes one file, never a directory or a root, and says when nothing is there", async () => {
      const sb = await h.provider.acquire(ALICE);
      await sb.writeFile("/mnt/user-data/uploads/a.txt", "a");
      await sb.writeFile("/mnt/user-data/uploads/b.txt", "b");
      await sb.remove("/mnt/user-data/uploads/a.txt");
      expect(await sb.exists("/mnt/user-data/uploads/a.txt")).toBe(false);
      expect(await sb.readFile("/mnt/user-data/uploads/b.txt")).toBe("b");
      expect((await sb.exec("ls /mnt/user-data/uploads")).stdout).toBe("b.txt\n");
      await expectCode(sb.remove("/mnt/user-data/uploads/a.txt"), "not_found");
      await expectCode(sb.remove(`${W}/no/such/dir/x.txt`), "not_found");
      await sb.writeFile(`${W}/d/f.txt`, "x");
      await expectCode(sb.remove(`${W}/d`), "is_directory");
      for (const root of Object.values(VIRTUAL_DIRS)) await expectCode(sb.remove(root), "is_directory");
      expect(await sb.readFile(`${W}/d/f.txt`)).toBe("x");
      await sb.remove("d/f.txt");
      expect(await sb.list(`${W}/d`)).toEqual([]);
      await h.provider.release(sb.id);
      await expectCode(sb.remove("/mnt/user-data/uploads/b.txt"), "sandbox_unavailable");
    });

    it("remove unlinks a symbolic link itself and leaves its target alone", async () => {
      const sb = await h.provider.acquire(ALICE);
      await h.plantInsideLink(sb, "to-outputs");
      await sb.writeFile("/mnt/user-data/outputs/o.txt", "out");
      await sb.remove("to-outputs");
      expect(await sb.exists("to-outputs")).toBe(false);
      expect(await sb.readFile("/mnt/user-data/outputs/o.txt")).toBe("out");
      const outside = await h.plantEscapeLink(sb, "escape");
      await sb.remove("escape");
      expect(await outside.outsideHas("secret.txt")).toBe(true);
      expect((await sb.list(W)).map((e) => e.name)).not.toContain("escape");
    });

    it("relative paths resolve against the workspace", async () => {
      const sb = await h.provider.acquire(ALICE);
      await sb.writeFile("rel/a.txt", "rel");
      expect(await sb.readFile(`${W}/rel/a.txt`)).toBe("rel");
      expect(await sb.readFile("./rel/../rel/a.txt")).toBe("rel");
      expect(await sb.exists("rel/a.txt")).toBe(true);
      expect((await sb.list(".", { depth: 1 })).map((e) => e.path)).toEqual([`${W}/rel`]);
      expect((await sb.exec("cat a.txt", { cwd: "rel" })).stdout).toBe("rel");
    });

    it("list honours depth, sorts by path and reports types and sizes", async () => {
      const sb = await h.provider.acquire(ALICE);
      await sb.writeFile(`${W}/a.txt`, "12345");
      await sb.writeFile(`${W}/d/b.txt`, "b");
      await sb.writeFile(`${W}/d/e/c.txt`, "c");
      const depth1 = await sb.list(W, { depth: 1 });
      expect(depth1).toEqual([
        { path: `${W}/a.txt`, name: "a.txt", type: "file", size: 5 },
        { path: `${W}/d`, name: "d", type: "directory" },
      ]);
      expect((await sb.list(W, { depth: 2 })).map((e) => e.path)).toEqual([`${W}/a.txt`, `${W}/d`, `${W}/d/b.txt`, `${W}/d/e`]);
      expect((await sb.list(W)).map((e) => e.path)).toEqual([`${W}/a.txt`, `${W}/d`, `${W}/d/b.txt`, `${W}/d/e`]);
      expect((await sb.list(W, { depth: 5 })).map((e) => e.path)).toContain(`${W}/d/e/c.txt`);
      expect(await sb.list(VIRTUAL_DIRS.uploads)).toEqual([]);
      await expectCode(sb.list(`${W}/a.txt`), "not_found");
    });

    it("exists for files, directories, roots and missing paths", async () => {
      const sb = await h.provider.acquire(ALICE);
      for (const root of Object.values(VIRTUAL_DIRS)) expect(await sb.exists(root)).toBe(true);
      expect(await sb.exists(`${W}/x.txt`)).toBe(false);
      await sb.writeFile(`${W}/x.txt`, "x");
      expect(await sb.exists(`${W}/x.txt`)).toBe(true);
      expect(await sb.exists(`${W}/x.txt/inner`)).toBe(false);
    });

    it("the same scope gets the same sandbox while acquired; release ends it", async () => {
      const [a, b] = await Promise.all([h.provider.acquire(ALICE), h.provider.acquire({ ...ALICE })]);
      expect(b).toBe(a);
      expect(await h.provider.acquire(ALICE)).toBe(a);
      expect(a.scope).toEqual(ALICE);
      expect(h.provider.get(a.id)).toBe(a);
      const other = await h.provider.acquire(ALICE_2);
      expect(other.id).not.toBe(a.id);
      await h.provider.release(a.id);
      expect(h.provider.get(a.id)).toBeUndefined();
      await expectCode(a.readFile(`${W}/x`), "sandbox_unavailable");
      await h.provider.release(a.id); // a second release is harmless
      const again = await h.provider.acquire(ALICE);
      expect(again.id).toBe(a.id);
      expect(h.provider.get(again.id)).toBe(again);
    });

    it("files survive a release of the thread", async () => {
      const sb = await h.provider.acquire(ALICE);
      await sb.writeFile(`${W}/keep.txt`, "kept");
      await h.provider.release(sb.id);
      const again = await h.provider.acquire(ALICE);
      expect(await again.readFile(`${W}/keep.txt`)).toBe("kept");
    });

    it("forget deletes one thread's files, acquired or released, and drops its sandbox unsaved; other threads and users keep theirs", async () => {
      const forget = h.provider.forget!.bind(h.provider);
      const held = await h.provider.acquire(ALICE);
      await held.writeFile("/mnt/user-data/uploads/plans.txt", "secret plans");
      await held.writeFile("/mnt/user-data/outputs/report.md", "report");
      const sibling = await h.provider.acquire(ALICE_2);
      await sibling.writeFile(`${W}/sibling.txt`, "mine");
      const bob = await h.provider.acquire(BOB);
      await bob.writeFile(`${W}/bob.txt`, "bob's");
      await h.provider.release(bob.id);

      await forget(ALICE);
      expect(h.provider.get(held.id)).toBeUndefined();
      await expectCode(held.readFile("/mnt/user-data/uploads/plans.txt"), "sandbox_unavailable");
      const fresh = await h.provider.acquire(ALICE);
      expect(await fresh.exists("/mnt/user-data/uploads/plans.txt")).toBe(false);
      expect(await fresh.exists("/mnt/user-data/outputs/report.md")).toBe(false);
      expect(await fresh.list(W)).toEqual([]);
      expect(await sibling.readFile(`${W}/sibling.txt`)).toBe("mine");
      expect(await (await h.provider.acquire(BOB)).readFile(`${W}/bob.txt`)).toBe("bob's");

      // A released thread's stored files go too, so a new provider over the same state finds none.
      await fresh.writeFile(`${W}/again.txt`, "again");
      await h.provider.release(fresh.id);
      await forget(ALICE);
      await forget(ALICE); // nothing left: harmless
      if (h.reopen) {
        const second = h.reopen();
        try {
          expect(await (await second.acquire(ALICE)).list(W)).toEqual([]);
        } finally {
          await second.close();
        }
      }
      await expectCode(forget({ userId: "alice", threadId: "../thread-2" }), "sandbox_unavailable");
      expect(await sibling.readFile(`${W}/sibling.txt`)).toBe("mine");
    });

    it("two threads of one user are isolated", async () => {
      const t1 = await h.provider.acquire(ALICE);
      const t2 = await h.provider.acquire(ALICE_2);
      await t1.writeFile(`${W}/only-t1.txt`, "t1");
      expect(await t2.exists(`${W}/only-t1.txt`)).toBe(false);
      expect((await t2.exec(`cat ${W}/only-t1.txt`)).exitCode).not.toBe(0);
      expect(await t2.list(W)).toEqual([]);
    });

    it("two users are isolated", async () => {
      const a = await h.provider.acquire(ALICE);
      const b = await h.provider.acquire(BOB);
      expect(b.id).not.toBe(a.id);
      await a.writeFile("/mnt/user-data/outputs/report.md", "alice's");
      expect(await b.exists("/mnt/user-data/outputs/report.md")).toBe(false);
      await b.writeFile("/mnt/user-data/outputs/report.md", "bob's");
      expect(await a.readFile("/mnt/user-data/outputs/report.md")).toBe("alice's");
      expect((await b.exec("cat /mnt/user-data/outputs/report.md")).stdout).toBe("bob's");
    });

    it("refuses scope ids that could name another folder", async () => {
      for (const scope of [
        { userId: "../x", threadId: "t" },
        { userId: "a", threadId: "../../etc" },
        { userId: "a/b", threadId: "t" },
        { userId: "", threadId: "t" },
        { userId: "a:b", threadId: "t" },
      ]) {
        await expectCode(h.provider.acquire(scope), "sandbox_unavailable");
      }
    });

    it("refuses every path-escape form and touches nothing", async () => {
      const sb = await h.provider.acquire(ALICE);
      const before = await h.outsideState(sb);
      for (const path of ESCAPES) {
        const error = await expectOutside(sb.writeFile(path, "pwned"), path);
        expect(error.message).toContain(JSON.stringify(path.replaceAll("\0", "\\0")));
        await expectOutside(sb.writeFile(path, "pwned", { append: true }), path);
        await expectOutside(sb.readFile(path), path);
        await expectOutside(sb.readFileBytes(path), path);
        await expectOutside(sb.writeFileBytes(path, new Uint8Array([1, 2])), path);
        await expectOutside(sb.remove(path), path);
        await expectOutside(sb.list(path), path);
        await expectOutside(sb.exists(path), path);
      }
      expect(await h.outsideState(sb)).toBe(before);
      expect(await sb.list(W)).toEqual([]);
    });

    it("refuses symlinks that lead outside, follows those that stay inside", async () => {
      const sb = await h.provider.acquire(ALICE);
      const outside = await h.plantEscapeLink(sb, "escape");
      await expectOutside(sb.readFile("escape/secret.txt"));
      await expectOutside(sb.readFileBytes("escape/secret.txt"));
      await expectOutside(sb.writeFile("escape/planted.txt", "x"));
      await expectOutside(sb.writeFile("escape/new/planted.txt", "x"));
      await expectOutside(sb.writeFileBytes("escape/planted.txt", new Uint8Array([1])));
      await expectOutside(sb.writeFileBytes("escape/new/planted.txt", new Uint8Array([1])));
      await expectOutside(sb.remove("escape/secret.txt"));
      expect(await outside.outsideHas("secret.txt")).toBe(true);
      await expectOutside(sb.list("escape"));
      await expectOutside(sb.exists("escape/secret.txt"));
      await expectOutside(sb.exec("ls", { cwd: "escape" }));
      expect(await outside.outsideHas("planted.txt")).toBe(false);
      expect(await outside.outsideHas("new")).toBe(false);
      expect((await sb.list(W)).map((e) => e.name)).not.toContain("escape");

      const dangling = await h.plantDanglingLink(sb, "dangling.txt");
      await expectOutside(sb.writeFile("dangling.txt", "x"));
      await expectOutside(sb.writeFileBytes("dangling.txt", new Uint8Array([1])));
      expect(await dangling.targetExists()).toBe(false);

      await h.plantInsideLink(sb, "to-outputs");
      await sb.writeFile("/mnt/user-data/outputs/o.txt", "out");
      expect(await sb.readFile("to-outputs/o.txt")).toBe("out");
      expect(new TextDecoder().decode(await sb.readFileBytes("to-outputs/o.txt"))).toBe("out");
      await sb.writeFile("to-outputs/p.txt", "via link");
      expect(await sb.readFile("/mnt/user-data/outputs/p.txt")).toBe("via link");
      await sb.writeFileBytes("to-outputs/q.bin", new Uint8Array([0, 1]));
      expect([...(await sb.readFileBytes("/mnt/user-data/outputs/q.bin"))]).toEqual([0, 1]);
    });

    it("a timed-out command is stopped and reported", async () => {
      const sb = await h.provider.acquire(ALICE);
      const result = await sb.exec("echo started; sleep 5; echo finished", { timeoutMs: 300 });
      expect(result.exitCode).toBe(124);
      expect(result.stdout).not.toContain("finished");
      expect(result.stderr).toMatch(/timed out after 300 ms/);
      expect((await sb.exec("echo still-usable")).stdout).toBe("still-usable\n");
    });

    it("an aborted command rejects with the signal's reason", async () => {
      const sb = await h.provider.acquire(ALICE);
      const controller = new AbortController();
      const reason = new Error("user cancelled");
      setTimeout(() => controller.abort(reason), 100);
      await expect(sb.exec("sleep 5", { signal: controller.signal })).rejects.toBe(reason);
      await expect(sb.exec("echo x", { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    });

    it.skipIf(!opts.reopens)("a new provider over the same state brings back a released thread's files", async () => {
      expect(h.reopen).toBeDefined();
      const sb = await h.provider.acquire(ALICE);
      await sb.writeFile(`${W}/src/main.ts`, "export {};\n");
      await sb.writeFile("/mnt/user-data/uploads/data.csv", "a,b\n1,2\n");
      await sb.writeFile("/mnt/user-data/outputs/report.md", "# Réport ✓\n");
      await sb.writeFileBytes("/mnt/user-data/uploads/photo.jpg", new Uint8Array([0xff, 0xd8, 0x00, 0xc3, 0x28]));
      await sb.exec("mkdir -p empty-dir");
      await h.plantInsideLink(sb, "to-outputs");
      await h.provider.release(sb.id);

      const second = h.reopen!();
      try {
        const back = await second.acquire(ALICE);
        expect(await back.readFile(`${W}/src/main.ts`)).toBe("export {};\n");
        expect(await back.readFile("/mnt/user-data/uploads/data.csv")).toBe("a,b\n1,2\n");
        expect(await back.readFile("/mnt/user-data/outputs/report.md")).toBe("# Réport ✓\n");
        expect([...(await back.readFileBytes("/mnt/user-data/uploads/photo.jpg"))]).toEqual([0xff, 0xd8, 0x00, 0xc3, 0x28]);
        expect(await back.readFile("to-outputs/report.md")).toBe("# Réport ✓\n");
        expect(await back.exists(`${W}/empty-dir`)).toBe(true);
        expect((await back.exec("cat src/main.ts")).stdout).toBe("export {};\n");
        const bob = await second.acquire(BOB);
        expect(await bob.list(W)).toEqual([]);
      } finally {
        await second.close();
      }
    });

    it("uploads: a committed batch is in the uploads folder, durable without a release; an aborted one leaves nothing", async () => {
      const uploads = h.provider.uploads!;
      expect(uploads).toBeDefined();
      const big = Uint8Array.from({ length: 700_000 }, (_, i) => (i * 13) % 256);
      const batch = await uploads.begin(ALICE);
      const first = await batch.file("big.bin");
      for (let offset = 0; offset < big.length; offset += 100_000) await first.write(big.subarray(offset, offset + 100_000));
      await first.close();
      const second = await batch.file("note.txt");
      await second.write(new TextEncoder().encode("hi"));
      await second.close();
      await batch.commit();

      const dropped = await uploads.begin(ALICE);
      const never = await dropped.file("never.txt");
      await never.write(new TextEncoder().encode("no"));
      await never.close();
      await dropped.abort();

      const sb = await h.provider.acquire(ALICE);
      expect([...(await sb.readFileBytes("/mnt/user-data/uploads/big.bin"))]).toEqual([...big]);
      expect((await sb.list("/mnt/user-data/uploads", { depth: 1 })).map((e) => e.name)).toEqual(["big.bin", "note.txt"]);
      if (h.reopen) {
        // Another process over the same state, the first never having released anything.
        const other = h.reopen();
        try {
          const back = await other.acquire(ALICE);
          expect(await back.readFile("/mnt/user-data/uploads/note.txt")).toBe("hi");
          expect((await back.readFileBytes("/mnt/user-data/uploads/big.bin")).length).toBe(big.length);
        } finally {
          await other.close();
        }
      }
    });

    it("uploads: a folder at a name refuses the whole batch (is_directory) and changes nothing", async () => {
      const sb = await h.provider.acquire(ALICE);
      await sb.exec("mkdir -p /mnt/user-data/uploads/taken.txt");
      const batch = await h.provider.uploads!.begin(ALICE);
      for (const name of ["fine.txt", "taken.txt"]) {
        const sink = await batch.file(name);
        await sink.write(new TextEncoder().encode(name));
        await sink.close();
      }
      await expect(batch.commit()).rejects.toMatchObject({ code: "is_directory" });
      await batch.abort();
      expect((await sb.list("/mnt/user-data/uploads", { depth: 1 })).map((e) => [e.name, e.type])).toEqual([["taken.txt", "directory"]]);
    });
  });
}

// --- virtual ---------------------------------------------------------------------------------

function virtualHarness(storage?: () => KeyValue, inWorker = false): () => Promise<Harness> {
  return async () => {
    const kv = storage?.();
    const workers = inWorker ? await runtimeSandboxWorkers() : undefined;
    const make = () => createVirtualSandboxProvider({ ...(kv ? { storage: kv } : {}), ...(workers ? { workers } : {}) });
    const run = async (sb: Sandbox, command: string) => {
      const r = await sb.exec(command);
      if (r.exitCode !== 0) throw new Error(`${command}: ${r.stderr}`);
      return r.stdout;
    };
    return {
      provider: make(),
      async plantEscapeLink(sb, name) {
        await run(sb, `mkdir -p /tmp/outside && echo secret > /tmp/outside/secret.txt && ln -s /tmp/outside ${W}/${name}`);
        return { outsideHas: async (file) => (await sb.exec(`test -e /tmp/outside/${file}`)).exitCode === 0 };
      },
      async plantDanglingLink(sb, name) {
        await run(sb, `ln -s /tmp/nowhere/target.txt ${W}/${name}`);
        return { targetExists: async () => (await sb.exec("test -e /tmp/nowhere/target.txt")).exitCode === 0 };
      },
      async plantInsideLink(sb, name) {
        await run(sb, `ln -s ${VIRTUAL_DIRS.outputs} ${W}/${name}`);
      },
      async plantBytes(sb, virtualPath, bytes) {
        // The in-memory file system behind the sandbox (on the caller's thread in worker mode too): the file API itself only writes text.
        await (sb as unknown as { fs: InMemoryFs }).fs.writeFile(virtualPath, bytes);
      },
      // In-memory file system: the whole tree outside the roots (commands may write there, the file API may not).
      outsideState: (sb) => run(sb, "find / -not -path '/mnt/user-data/*' -not -path '/proc*' -not -path '/dev*' | sort"),
      ...(kv ? { reopen: make } : {}),
      cleanup: async () => undefined,
    };
  };
}

sandboxContract("virtual, in memory", virtualHarness(), { kind: "virtual", reopens: false });
sandboxContract("virtual, memory KeyValue", virtualHarness(createMemoryKeyValue), { kind: "virtual", reopens: true });
sandboxContract("virtual in a worker, memory KeyValue", virtualHarness(createMemoryKeyValue, true), { kind: "virtual", reopens: true });

describe(`virtual sandbox with fs storage (${runtime})`, () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "deerflow-vsb-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("files written in one provider come back in another process-like provider on the same fs dir", async () => {
    const first = createVirtualSandboxProvider({ storage: createFsKeyValue(dir) });
    const sb = await first.acquire(ALICE);
    await sb.writeFile("notes/today.md", "persisted ✓\n");
    await sb.exec("echo from-shell > /mnt/user-data/outputs/o.txt");
    await first.close();

    const second = createVirtualSandboxProvider({ storage: createFsKeyValue(dir) });
    const back = await second.acquire(ALICE);
    expect(await back.readFile(`${W}/notes/today.md`)).toBe("persisted ✓\n");
    expect(await back.readFile("/mnt/user-data/outputs/o.txt")).toBe("from-shell\n");
    expect(await (await second.acquire(ALICE_2)).exists(`${W}/notes/today.md`)).toBe(false);
    await second.close();
  });

  it("a save writes the thread's files only when they differ from what it last read or wrote; a changed release still saves", async () => {
    const storage = createMemoryKeyValue();
    const key = "sandbox:virtual:alice:thread-1";
    let writes = 0;
    const counted = new Proxy(storage, {
      get(target, property, receiver) {
        const original = Reflect.get(target, property, receiver);
        if (typeof original !== "function") return original;
        return (...args: unknown[]) => {
          if (["setItem", "setItemRaw", "removeItem"].includes(String(property)) && args[0] === key) writes++;
          if (property === "setItems") writes += (args[0] as Array<{ key: string }>).filter((item) => item.key === key).length;
          return (original as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    }) as KeyValue;
    const provider = createVirtualSandboxProvider({ storage: counted });
    const sb = await provider.acquire(ALICE);
    await sb.writeFile("note.md", "one two three\n");
    await sb.flush!();
    expect(writes).toBe(1);
    // A command that only reads, its flush, and the release after it: the stored files are these already.
    expect((await sb.exec("wc -w note.md")).stdout).toContain("3");
    await sb.flush!();
    await provider.release(sb.id);
    expect(writes).toBe(1);

    const again = createVirtualSandboxProvider({ storage: counted });
    const back = await again.acquire(ALICE);
    expect(await back.readFile("note.md")).toBe("one two three\n");
    await again.release(back.id);
    expect(writes).toBe(1);
    // Another worker saved meanwhile: an unchanged release leaves its files stored, a changed one merges with them.
    const mine = await again.acquire(ALICE);
    const other = createVirtualSandboxProvider({ storage: counted });
    const theirs = await other.acquire(ALICE);
    await theirs.writeFile("theirs.md", "theirs\n");
    await other.release(theirs.id);
    expect(writes).toBe(2);
    await again.release(mine.id);
    expect(writes).toBe(2);
    const changed = await again.acquire(ALICE);
    await changed.writeFile("note.md", "four\n");
    await again.release(changed.id);
    expect(writes).toBe(3);
    const last = await createVirtualSandboxProvider({ storage }).acquire(ALICE);
    expect(await last.readFile("note.md")).toBe("four\n");
    expect(await last.readFile("theirs.md")).toBe("theirs\n");
  });

  it("refuses stored data it cannot read instead of overwriting it", async () => {
    const kv = createFsKeyValue(dir);
    await kv.setItem("sandbox:virtual:alice:thread-1", { something: "else" });
    const provider = createVirtualSandboxProvider({ storage: kv });
    await expectCode(provider.acquire(ALICE), "sandbox_unavailable");
    expect(await kv.getItem("sandbox:virtual:alice:thread-1")).toEqual({ something: "else" });
  });

  it("ignores stored entries outside the roots", async () => {
    const kv = createMemoryKeyValue();
    await kv.setItem("sandbox:virtual:alice:thread-1", {
      format: "deerflow-edge.virtual-sandbox",
      version: 1,
      entries: [
        { path: "/etc/evil", type: "file", text: "x" },
        { path: "/mnt/user-data/workspace/../../etc/evil2", type: "file", text: "x" },
        { path: "/mnt/user-data/workspace/ok.txt", type: "file", text: "ok" },
      ],
    });
    const provider = createVirtualSandboxProvider({ storage: kv });
    const sb = await provider.acquire(ALICE);
    expect(await sb.readFile("ok.txt")).toBe("ok");
    expect((await sb.exec("ls /etc/evil /etc/evil2")).exitCode).not.toBe(0);
    await provider.close();
  });
});

// --- local -----------------------------------------------------------------------------------

function localHarness(): () => Promise<Harness> {
  return async () => {
    const base = await mkdtemp(join(tmpdir(), "deerflow-lsb-"));
    const rootDir = join(base, "root");
    const outsideDir = join(base, "outside");
    await mkdir(outsideDir, { recursive: true });
    await writeFile(join(outsideDir, "secret.txt"), "secret");
    const make = () => createLocalSandboxProvider({ rootDir, runner: currentRunner() });
    const hostWorkspace = (sb: Sandbox) =>
      join(rootDir, "users", sb.scope.userId, "threads", sb.scope.threadId, "user-data", "workspace");
    return {
      provider: make(),
      async plantEscapeLink(sb, name) {
        await symlink(outsideDir, join(hostWorkspace(sb), name));
        return {
          outsideHas: (file) =>
            lstat(join(outsideDir, file)).then(
              () => true,
              () => false,
            ),
        };
      },
      async plantDanglingLink(sb, name) {
        const target = join(outsideDir, "dangling-target.txt");
        await symlink(target, join(hostWorkspace(sb), name));
        return {
          targetExists: () =>
            lstat(target).then(
              () => true,
              () => false,
            ),
        };
      },
      async plantInsideLink(sb, name) {
        await symlink(join(hostWorkspace(sb), "..", "outputs"), join(hostWorkspace(sb), name));
      },
      async plantBytes(sb, virtualPath, bytes) {
        await writeFile(join(hostWorkspace(sb), "..", virtualPath.slice("/mnt/user-data/".length)), bytes);
      },
      // The whole temp base except this thread's own roots, with file contents.
      async outsideState(sb) {
        const own = join("root", "users", sb.scope.userId, "threads", sb.scope.threadId, "user-data");
        const entries = (await hostTree(base)).filter((p) => !p.startsWith(`${own}/workspace/`) && !p.startsWith(`${own}/uploads/`) && !p.startsWith(`${own}/outputs/`));
        const secret = await readFile(join(outsideDir, "secret.txt"), "utf8");
        return JSON.stringify({ entries, secret });
      },
      reopen: make,
      cleanup: () => rm(base, { recursive: true, force: true }),
    };
  };
}

sandboxContract("local", localHarness(), { kind: "local", reopens: true });

describe(`local sandbox specifics (${runtime})`, () => {
  let base: string;
  beforeEach(async () => {
    base = await mkdtemp(join(tmpdir(), "deerflow-lsb-"));
  });
  afterEach(async () => {
    await rm(base, { recursive: true, force: true });
  });

  it("keeps each thread's files at <rootDir>/users/<user>/threads/<thread>/user-data", async () => {
    const provider = createLocalSandboxProvider({ rootDir: base, runner: currentRunner() });
    const sb = await provider.acquire(ALICE);
    expect(sb.id).toBe("local:alice:thread-1");
    await sb.writeFile("/mnt/user-data/outputs/r.md", "hi");
    const host = join(base, "users", "alice", "threads", "thread-1", "user-data");
    expect(await readFile(join(host, "outputs", "r.md"), "utf8")).toBe("hi");
    expect((await hostTree(host)).filter((p) => p.endsWith("/"))).toEqual(["outputs/", "uploads/", "workspace/"]);
    expect((await sb.exec("ls /mnt/user-data/outputs; echo $HOME")).stdout).toBe("r.md\n/mnt/user-data/workspace\n");
    await provider.close();
  });

  it("refuses a rootDir a shell would misread when commands are rewritten", async () => {
    const provider = createLocalSandboxProvider({ rootDir: join(base, "has space"), runner: currentRunner() });
    await expectCode(provider.acquire(ALICE), "sandbox_unavailable");
  });

  it("reports a shell that cannot start as sandbox_unavailable", async () => {
    const provider = createLocalSandboxProvider({ rootDir: base, runner: currentRunner(), shell: "no-such-shell-xyz" });
    const sb = await provider.acquire(ALICE);
    await expectCode(sb.exec("echo hi"), "sandbox_unavailable");
  });
});
