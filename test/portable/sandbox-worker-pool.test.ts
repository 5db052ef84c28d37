// The virtual sandbox's workers are bounded: a burst of threads running commands at once does not
// start a worker (a thread with its own interpreter, about 11 MB on Bun) per thread. Past
// `maxWorkers` a thread borrows the worker of a thread with no command in flight, or waits for a
// command to finish; every command still runs over its own thread's files.
import { afterEach, describe, expect, it } from "vitest";
import type { SandboxProvider } from "../../src/ports/sandbox.ts";
import type { SandboxWorker, SandboxWorkerPort } from "../../src/ports/sandbox-worker.ts";
import { createVirtualSandboxProvider } from "../../src/sandbox/virtual.ts";
import { HOST_RECLAIM_AFTER_IDLE_MS, HOST_READY, serveVirtualSandboxHost, type HostReply } from "../../src/sandbox/virtual-host.ts";
import { createMemoryKeyValue } from "../../src/storage/key-value.ts";
import { runtime, runtimeSandboxWorkers } from "./sandbox-workers.ts";

/** First commands in a new worker load just-bash's modules, which takes a while under load. */
const UNHURRIED = { timeoutMs: 60_000 };
const SLEEPING_LOOP = "while true; do sleep 0.01; done";

/** The runtime's workers, counted: how many are started and not terminated, and the most at once. */
async function countedWorkers(): Promise<{ port: SandboxWorkerPort; live(): number; most(): number; started(): number }> {
  const inner = await runtimeSandboxWorkers();
  let live = 0;
  let most = 0;
  let started = 0;
  return {
    port: {
      start(): SandboxWorker {
        const worker = inner.start();
        started++;
        most = Math.max(most, ++live);
        let ended = false;
        return {
          postMessage: (message) => worker.postMessage(message),
          onMessage: (listener) => worker.onMessage(listener),
          onFailure: (listener) => worker.onFailure(listener),
          terminate() {
            worker.terminate();
            if (!ended) live--;
            ended = true;
          },
          ...(worker.keepAlive ? { keepAlive: (yes: boolean) => worker.keepAlive!(yes) } : {}),
        };
      },
    },
    live: () => live,
    most: () => most,
    started: () => started,
  };
}

describe(`the virtual sandbox's workers are bounded (${runtime})`, () => {
  let provider: SandboxProvider | undefined;
  afterEach(async () => {
    await provider?.close();
    provider = undefined;
  });

  it("eight threads running commands at once with max 2 workers: every command runs over its own files, never more than 2 workers", async () => {
    const counted = await countedWorkers();
    provider = createVirtualSandboxProvider({ storage: createMemoryKeyValue(), workers: counted.port, maxWorkers: 2 });
    const sandboxes = await Promise.all(Array.from({ length: 8 }, (_, n) => provider!.acquire({ userId: `user-${n}`, threadId: "thread-1" })));
    for (const [n, sb] of sandboxes.entries()) await sb.writeFile("name.txt", `thread ${n}\n`);
    // Two commands per thread, all at once: the second ones run after the worker moved between threads.
    const rounds = await Promise.all(
      sandboxes.map(async (sb, n) => {
        const first = await sb.exec(`cat name.txt; echo ${n} >> name.txt`, UNHURRIED);
        const second = await sb.exec("cat name.txt", UNHURRIED);
        return [first.stdout, second.stdout];
      }),
    );
    expect(rounds).toEqual(sandboxes.map((_, n) => [`thread ${n}\n`, `thread ${n}\n${n}\n`]));
    for (const [n, sb] of sandboxes.entries()) expect(await sb.readFile("name.txt")).toBe(`thread ${n}\n${n}\n`);
    expect(counted.most()).toBeLessThanOrEqual(2);
    // Workers were reused, not started per thread and terminated.
    expect(counted.started()).toBeLessThanOrEqual(2);
  });

  it("a thread keeps its worker between commands while nobody else needs one (what it left in /tmp is still there)", async () => {
    const counted = await countedWorkers();
    provider = createVirtualSandboxProvider({ storage: createMemoryKeyValue(), workers: counted.port, maxWorkers: 2 });
    const sb = await provider.acquire({ userId: "alice", threadId: "thread-1" });
    await sb.exec("echo scratch > /tmp/scratch.txt", UNHURRIED);
    expect((await sb.exec("cat /tmp/scratch.txt", UNHURRIED)).stdout).toBe("scratch\n");
  });

  it("with every worker running a command, another thread's command waits and runs once one finishes; an abort ends the wait", async () => {
    const counted = await countedWorkers();
    provider = createVirtualSandboxProvider({ storage: createMemoryKeyValue(), workers: counted.port, maxWorkers: 1 });
    const busy = await provider.acquire({ userId: "alice", threadId: "thread-1" });
    const other = await provider.acquire({ userId: "bob", threadId: "thread-1" });
    const third = await provider.acquire({ userId: "carol", threadId: "thread-1" });
    await busy.exec("true", UNHURRIED);
    // A loop that never ends by itself: each turn sleeps 10 ms, so just-bash's command limit
    // (100000 commands) lies minutes away and only the 600 ms timeout can end it (exit 124). A busy
    // loop would reach that limit in about 1.2 s on Bun, close enough to the timeout to race it under load.
    const loop = busy.exec(SLEEPING_LOOP, { timeoutMs: 600 });
    let waitedDone = false;
    const waited = other.exec("echo after", UNHURRIED).finally(() => (waitedDone = true));
    const controller = new AbortController();
    const reason = new Error("gave up");
    const aborted = third.exec("echo never", { ...UNHURRIED, signal: controller.signal });
    await new Promise((resolve) => setTimeout(resolve, 200));
    // The loop holds the only worker: bob's command has not run yet.
    expect(waitedDone).toBe(false);
    controller.abort(reason);
    await expect(aborted).rejects.toBe(reason);
    expect((await loop).exitCode).toBe(124);
    expect((await waited).stdout).toBe("after\n");
    expect(counted.most()).toBe(1);
  });

  it("a thread whose worker went to another runs its next command over its files in a worker again", async () => {
    const counted = await countedWorkers();
    provider = createVirtualSandboxProvider({ storage: createMemoryKeyValue(), workers: counted.port, maxWorkers: 1 });
    const alice = await provider.acquire({ userId: "alice", threadId: "thread-1" });
    const bob = await provider.acquire({ userId: "bob", threadId: "thread-1" });
    await alice.exec("echo alice > mine.txt; echo secret > /tmp/alice.txt", UNHURRIED);
    // Bob takes alice's idle worker and sees nothing of hers, in her files or in the worker's /tmp;
    // alice's next command takes it back and sees only her files.
    expect((await bob.exec("ls; ls /tmp; echo bob > mine.txt", UNHURRIED)).stdout).toBe("");
    expect((await alice.exec("cat mine.txt; ls /tmp", UNHURRIED)).stdout).toBe("alice\n");
    expect(await bob.readFile("mine.txt")).toBe("bob\n");
    expect(counted.started()).toBe(1);
  });
});

describe(`idle sandbox workers give their memory back (${runtime})`, () => {
  it("once their sandboxes let go, one started worker stays and the others are terminated", async () => {
    const counted = await countedWorkers();
    const provider = createVirtualSandboxProvider({ storage: createMemoryKeyValue(), workers: counted.port, maxWorkers: 4 });
    try {
      const sandboxes = await Promise.all([1, 2, 3, 4].map((n) => provider.acquire({ userId: `user-${n}`, threadId: "thread-1" })));
      await Promise.all(sandboxes.map((sb) => sb.exec("echo hi", UNHURRIED)));
      expect(counted.live()).toBe(4);
      for (const sb of sandboxes) await provider.release(sb.id);
      expect(counted.live()).toBe(1);
    } finally {
      await provider.close();
    }
    expect(counted.live()).toBe(0);
  });

  it("a worker's host asks its runtime to collect once no command came for a while, not while one runs", async () => {
    let listener: ((message: unknown) => void) | undefined;
    const replies: HostReply[] = [];
    let reclaims = 0;
    serveVirtualSandboxHost({
      postMessage: (message) => {
        if (message !== HOST_READY) replies.push(message as HostReply);
      },
      onMessage: (l) => (listener = l),
      reclaimMemory: () => reclaims++,
    });
    const files = { format: "deerflow-edge.virtual-sandbox", version: 1, entries: [] } as const;
    const exec = (id: number, command: string) => listener!({ id, op: "exec", command, cwd: "/mnt/user-data/workspace", timeoutMs: 30_000, defenseInDepth: false, files, fresh: id === 1 });
    const answered = (n: number) => until(() => replies.length >= n, `${n} replies`);
    exec(1, "echo one");
    await answered(1);
    expect(replies[0]).toMatchObject({ id: 1, ok: true });
    // A command longer than the idle time: no collection while it runs.
    exec(2, `sleep ${(HOST_RECLAIM_AFTER_IDLE_MS + 1000) / 1000}`);
    await answered(2);
    expect(reclaims).toBe(0);
    await until(() => reclaims === 1, "the collection after the idle time", HOST_RECLAIM_AFTER_IDLE_MS + 5000);
    await new Promise((resolve) => setTimeout(resolve, HOST_RECLAIM_AFTER_IDLE_MS + 500));
    // Once per quiet spell, not again and again while idle.
    expect(reclaims).toBe(1);
  });
});

async function until(condition: () => boolean, what: string, limitMs = 20_000): Promise<void> {
  const start = Date.now();
  while (!condition()) {
    if (Date.now() - start > limitMs) throw new Error(`gave up waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
