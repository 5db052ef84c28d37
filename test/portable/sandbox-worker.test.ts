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
const WARM_UP = "echo warm > warm.txt; i=0; while false; do i=$((i+1)); done";

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

  it("a stopped command leaves the files as they were before it; a call waiting behind it is refused, naming why", async () => {
    const sb = await provider.acquire(ALICE);
    await sb.writeFile("kept.txt", "before\n");
    await sb.exec(WARM_UP, UNHURRIED);
    const run = tickWhile(sb.exec(`echo partial > half.txt; echo changed > kept.txt; ${RUNAWAY_LOOP}`, { timeoutMs: 300 }));
    await until(() => run.ticks() >= 5, "5 timer turns");
    const behind = sb.readFile("kept.txt");
    const refused = await behind.then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(SandboxError);
    expect((refused as SandboxError).code).toBe("sandbox_unavailable");
    expect((refused as SandboxError).message).toMatch(/restarted because a command ran past its timeout of 300 ms/);
    const result = await run.done;
    expect(result).toMatchObject({ exitCode: 124 });
    expect(result.stderr).toMatch(/timed out after 300 ms/);
    expect(await sb.readFile("kept.txt")).toBe("before\n");
    expect(await sb.exists("half.txt")).toBe(false);
    await sb.writeFile("after.txt", "ok");
    expect((await sb.exec("cat after.txt kept.txt", UNHURRIED)).stdout).toBe("okbefore\n");
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
  it("saves the files as they were before the stuck command once its timeout restarts the worker", async () => {
    const storage = createMemoryKeyValue();
    const provider = createVirtualSandboxProvider({ storage, workers: await runtimeSandboxWorkers(), defaultTimeoutMs: 300 });
    try {
      const sb = await provider.acquire(ALICE);
      await sb.writeFile("kept.txt", "before\n");
      await sb.exec(WARM_UP, UNHURRIED);
      const stuck = sb.exec(`echo changed > kept.txt; ${RUNAWAY_LOOP}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
      await provider.release(sb.id);
      expect(await stuck).toMatchObject({ exitCode: 124 });
      const back = await provider.acquire(ALICE);
      expect(await back.readFile("kept.txt")).toBe("before\n");
    } finally {
      await provider.close();
    }
  });
});
