// The virtual sandbox with its interpreter in a worker (worker_threads on Node, Web Workers on Deno
// and Bun): a command that never yields leaves the caller's event loop free, its timeout stops it,
// and the thread's files come back as they were before it.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SandboxError } from "../../src/ports/sandbox.ts";
import type { ExecResult, SandboxProvider, SandboxScope } from "../../src/ports/sandbox.ts";
import type { SandboxWorkerPort } from "../../src/ports/sandbox-worker.ts";
import { createMemoryKeyValue } from "../../src/storage/key-value.ts";
import { createVirtualSandboxProvider } from "../../src/sandbox/virtual.ts";
import { RUNAWAY_LOOP, runtime, runtimeSandboxWorkers } from "./sandbox-workers.ts";

const ALICE: SandboxScope = { userId: "alice", threadId: "thread-1" };
/** For commands after a restart: a fresh worker loads each command's module on first use, which can take a while. */
const UNHURRIED = { timeoutMs: 30_000 };
/**
 * The runaway commands' constructs once, so that nothing is left to load when they run: a module
 * load is a turn of the worker's event loop, where it could answer a call meant to wait behind the loop.
 */
const WARM_UP = "echo warm > warm.txt; seq 1 2 > /dev/null; while false; do seq 1 2 > /dev/null; done";

/** Counts timer turns the caller's event loop gets while `work` is pending. */
function tickWhile<T>(work: Promise<T>): { ticks(): number; settled(): boolean; done: Promise<T> } {
  let ticks = 0;
  let settled = false;
  const timer = setInterval(() => ticks++, 10);
  const done = work.finally(() => {
    settled = true;
    clearInterval(timer);
  });
  done.catch(() => undefined);
  return { ticks: () => ticks, settled: () => settled, done };
}

/** Resolves once `condition` holds, checking on timer turns (so it needs a free event loop itself). */
async function until(condition: () => boolean, what: string, limitMs = 10_000): Promise<void> {
  const start = Date.now();
  while (!condition()) {
    if (Date.now() - start > limitMs) throw new Error(`gave up waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe(`the virtual sandbox in a worker (${runtime})`, () => {
  let workers: SandboxWorkerPort;
  let provider: SandboxProvider;
  beforeEach(async () => {
    workers = await runtimeSandboxWorkers();
    provider = createVirtualSandboxProvider({ storage: createMemoryKeyValue(), workers, defaultTimeoutMs: 500 });
  });
  afterEach(async () => {
    await provider.close();
  });

  it("timers keep firing while a runaway loop runs, and the default timeout stops it naming the limit", async () => {
    const sb = await provider.acquire(ALICE);
    const run = tickWhile(sb.exec(RUNAWAY_LOOP));
    await until(() => run.ticks() >= 5, "5 timer turns");
    // The loop is still in flight: its timer turns came while it ran, not after.
    expect(run.settled()).toBe(false);
    const result = await run.done;
    expect(result.exitCode).toBe(124);
    expect(result.stderr).toMatch(/timed out after 500 ms/);
    expect((await sb.exec("echo still-usable", UNHURRIED)).stdout).toBe("still-usable\n");
  });

  it("a stopped command leaves the files as they were before it; file calls made while it runs are answered at once", async () => {
    const sb = await provider.acquire(ALICE);
    await sb.writeFile("kept.txt", "before\n");
    await sb.exec(WARM_UP, UNHURRIED);
    const run = tickWhile(sb.exec(`echo partial > half.txt; echo changed > kept.txt; ${RUNAWAY_LOOP}`, { timeoutMs: 300 }));
    await until(() => run.ticks() >= 5, "5 timer turns");
    // The thread's files stay on the caller's thread: read and written while the command loops.
    expect(await sb.readFile("kept.txt")).toBe("before\n");
    await sb.writeFile("during.txt", "meanwhile");
    expect(run.settled()).toBe(false);
    const result = await run.done;
    expect(result).toMatchObject({ exitCode: 124 });
    expect(result.stderr).toMatch(/timed out after 300 ms/);
    expect(await sb.readFile("kept.txt")).toBe("before\n");
    expect(await sb.exists("half.txt")).toBe(false);
    await sb.writeFile("after.txt", "ok");
    expect((await sb.exec("cat after.txt kept.txt during.txt", UNHURRIED)).stdout).toBe("okbefore\nmeanwhile");
  });

  it("several runaway loops in parallel, one per thread, all leave the event loop free and all stop", async () => {
    const scopes = [1, 2, 3, 4].map((n) => ({ userId: `user-${n}`, threadId: "thread-1" }));
    const sandboxes = await Promise.all(scopes.map((scope) => provider.acquire(scope)));
    const runs = tickWhile(Promise.all(sandboxes.map((sb) => sb.exec(RUNAWAY_LOOP))));
    await until(() => runs.ticks() >= 5, "5 timer turns");
    expect(runs.settled()).toBe(false);
    const results: ExecResult[] = await runs.done;
    for (const result of results) expect(result).toMatchObject({ exitCode: 124 });
    expect(await Promise.all(sandboxes.map(async (sb) => (await sb.exec("echo up", UNHURRIED)).stdout))).toEqual(["up\n", "up\n", "up\n", "up\n"]);
  });

  it("an abort stops a runaway loop: the exec rejects with the signal's reason and the sandbox is usable again", async () => {
    const sb = await provider.acquire(ALICE);
    const controller = new AbortController();
    const reason = new Error("user cancelled");
    const run = tickWhile(sb.exec(RUNAWAY_LOOP, { signal: controller.signal, timeoutMs: 60_000 }));
    await until(() => run.ticks() >= 5, "5 timer turns");
    controller.abort(reason);
    await expect(run.done).rejects.toBe(reason);
    expect((await sb.exec("echo back", UNHURRIED)).stdout).toBe("back\n");
  });

  it("commands just-bash loads on first use work in the worker, and released files come back", async () => {
    const sb = await provider.acquire(ALICE);
    const result = await sb.exec(
      `echo '{"a":[1,2]}' | jq -c '.a'; printf 'b\\na\\nb\\n' | sort | uniq; echo x | sed s/x/y/; awk 'BEGIN{print 1+1}'; seq 3 | wc -l`,
      UNHURRIED,
    );
    expect(result).toEqual({ stdout: "[1,2]\na\nb\ny\n2\n3\n", stderr: "", exitCode: 0 });
    await sb.exec("echo saved > /mnt/user-data/outputs/o.txt");
    await provider.release(sb.id);
    const back = await provider.acquire(ALICE);
    expect(await back.readFile("/mnt/user-data/outputs/o.txt")).toBe("saved\n");
  });
});

describe(`releasing a worker sandbox while a command is stuck (${runtime})`, () => {
  it("saves the files as they were before the stuck command at once, and refuses that command, naming the release", async () => {
    const storage = createMemoryKeyValue();
    const provider = createVirtualSandboxProvider({ storage, workers: await runtimeSandboxWorkers(), defaultTimeoutMs: 60_000 });
    try {
      const sb = await provider.acquire(ALICE);
      await sb.writeFile("kept.txt", "before\n");
      await sb.exec(WARM_UP, UNHURRIED);
      const stuck = tickWhile(sb.exec(`echo changed > kept.txt; ${RUNAWAY_LOOP}`));
      await until(() => stuck.ticks() >= 5, "5 timer turns");
      await provider.release(sb.id);
      // Released well before the command's 60 s timeout: the release did not wait for it.
      const refused = await stuck.done.then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(refused).toBeInstanceOf(SandboxError);
      expect((refused as SandboxError).code).toBe("sandbox_unavailable");
      expect((refused as SandboxError).message).toMatch(/was released while this command ran/);
      const back = await provider.acquire(ALICE);
      expect(await back.readFile("kept.txt")).toBe("before\n");
      expect((await back.exec("cat kept.txt", UNHURRIED)).stdout).toBe("before\n");
    } finally {
      await provider.close();
    }
  });
});

describe(`worker commands and the thread's files, uploads included (${runtime})`, () => {
  it("what a command writes into uploads and workspace is read back, saved at flush, survives a release, and a live upload reaches the next command", async () => {
    const storage = createMemoryKeyValue();
    const workers = await runtimeSandboxWorkers();
    const provider = createVirtualSandboxProvider({ storage, workers });
    const upload = async (name: string, text: string) => {
      const batch = await provider.uploads!.begin(ALICE);
      const file = await batch.file(name);
      await file.write(new TextEncoder().encode(text));
      await file.close();
      await batch.commit();
    };
    try {
      await upload("given.txt", "from the user\n");
      const sb = await provider.acquire(ALICE);
      await sb.writeFileBytes("raw.bin", new Uint8Array([0, 255]));
      const wrote = await sb.exec(
        "cat /mnt/user-data/uploads/given.txt > copy.txt; echo made > /mnt/user-data/uploads/made.txt; mkdir -p sub/deep; cp raw.bin sub/deep/b.bin; ln -s copy.txt link.txt",
        UNHURRIED,
      );
      expect(wrote).toMatchObject({ exitCode: 0, stderr: "" });
      expect(await sb.readFile("copy.txt")).toBe("from the user\n");
      expect(await sb.readFile("/mnt/user-data/uploads/made.txt")).toBe("made\n");
      expect([...(await sb.readFileBytes("sub/deep/b.bin"))]).toEqual([0, 255]);
      expect(await sb.readFile("link.txt")).toBe("from the user\n");
      // The upload a command made is in the upload store once the sandbox is flushed (what the middleware does after a tool call).
      await sb.flush!();
      const other = createVirtualSandboxProvider({ storage });
      try {
        const seen = await other.acquire(ALICE);
        expect(await seen.readFile("/mnt/user-data/uploads/made.txt")).toBe("made\n");
        expect(await seen.readFile("copy.txt")).toBe("from the user\n");
      } finally {
        await other.close();
      }

      // An upload while the sandbox is live: the next command in the worker sees it.
      await upload("late.txt", "arrived later\n");
      expect((await sb.exec("cat /mnt/user-data/uploads/late.txt; ls /mnt/user-data/uploads", UNHURRIED)).stdout).toBe(
        "arrived later\ngiven.txt\nlate.txt\nmade.txt\n",
      );
      // A command that removes an upload and edits a workspace file: both seen by the file API.
      await sb.exec("rm /mnt/user-data/uploads/given.txt; echo more >> copy.txt", UNHURRIED);
      expect(await sb.exists("/mnt/user-data/uploads/given.txt")).toBe(false);
      expect(await sb.readFile("copy.txt")).toBe("from the user\nmore\n");

      // Commands one after another, with file calls between some of them: each sees the latest files.
      await sb.exec("echo 1 > seq.txt", UNHURRIED);
      expect((await sb.exec("cat seq.txt; echo 2 >> seq.txt", UNHURRIED)).stdout).toBe("1\n");
      await sb.writeFile("seq.txt", "3\n");
      expect((await sb.exec("cat seq.txt", UNHURRIED)).stdout).toBe("3\n");
      await sb.remove("seq.txt");
      expect((await sb.exec("test -e seq.txt || echo gone", UNHURRIED)).stdout).toBe("gone\n");

      await provider.release(sb.id);
      expect((await provider.uploads!.list!(ALICE))?.map((entry) => entry.name).sort()).toEqual(["late.txt", "made.txt"]);
      const back = await provider.acquire(ALICE);
      expect(await back.readFile("/mnt/user-data/uploads/made.txt")).toBe("made\n");
      expect(await back.exists("/mnt/user-data/uploads/given.txt")).toBe(false);
      expect(await back.readFile("copy.txt")).toBe("from the user\nmore\n");
      expect((await back.exec("cat sub/deep/b.bin | wc -c; readlink link.txt; cat /mnt/user-data/uploads/late.txt", UNHURRIED)).stdout).toBe(
        "2\ncopy.txt\narrived later\n",
      );
    } finally {
      await provider.close();
    }
  });
});

describe(`a worker command's changes, mirrored exactly (${runtime})`, () => {
  it("folders replaced by files and files by folders, moved trees, links and removals come back as the command left them", async () => {
    const provider = createVirtualSandboxProvider({ storage: createMemoryKeyValue(), workers: await runtimeSandboxWorkers() });
    const LIST = "find /mnt/user-data | sort; for f in $(find /mnt/user-data -type f | sort); do echo \"$f=$(cat $f)\"; done; for l in $(find /mnt/user-data -type l | sort); do echo \"$l->$(readlink $l)\"; done";
    try {
      const sb = await provider.acquire(ALICE);
      await sb.writeFile("tree/a/one.txt", "1");
      await sb.writeFile("tree/b.txt", "b");
      await sb.writeFile("gone/x.txt", "x");
      await sb.writeFile("was-file", "f");
      const inWorker = await sb.exec(
        `rm -r gone; mv tree moved; rm was-file; mkdir -p was-file/inner; echo in > was-file/inner/y.txt; rm -r moved/a; echo now-a-file > moved/a; ln -s /mnt/user-data/workspace/moved/b.txt /mnt/user-data/outputs/link; echo same > /mnt/user-data/outputs/o.txt; ${LIST}`,
        UNHURRIED,
      );
      expect(inWorker.exitCode).toBe(0);
      // A file call moves the files on, so the next command runs over the caller's copy of them.
      await sb.writeFile("/mnt/user-data/outputs/o.txt", "same\n");
      const fromCaller = await sb.exec(LIST, UNHURRIED);
      expect(fromCaller.stdout).toBe(inWorker.stdout);
      expect(await sb.readFile("moved/a")).toBe("now-a-file\n");
      expect(await sb.readFile("/mnt/user-data/outputs/link")).toBe("b");
      expect(await sb.exists("gone")).toBe(false);
    } finally {
      await provider.close();
    }
  });
});

describe(`an upload whose stored bytes are gone (${runtime})`, () => {
  it("does not stop the thread's commands in a worker: they run without it, and reading it says it is not there", async () => {
    const storage = createMemoryKeyValue();
    const provider = createVirtualSandboxProvider({ storage, workers: await runtimeSandboxWorkers() });
    try {
      const batch = await provider.uploads!.begin(ALICE);
      const file = await batch.file("lost.txt");
      await file.write(new TextEncoder().encode("soon gone"));
      await file.close();
      await batch.commit();
      const sb = await provider.acquire(ALICE);
      // The upload's records vanish from storage (another process forgot them, a disk lost them).
      for (const key of await storage.getKeys("")) if (key.includes(":data")) await storage.removeItem(key);
      expect((await sb.exec("echo still > w.txt; cat w.txt", UNHURRIED)).stdout).toBe("still\n");
      const refused = await sb.readFile("/mnt/user-data/uploads/lost.txt").then(() => undefined, (error: unknown) => error as SandboxError);
      expect(refused).toBeInstanceOf(SandboxError);
      expect(refused?.code).toBe("not_found");
    } finally {
      await provider.close();
    }
  });
});
