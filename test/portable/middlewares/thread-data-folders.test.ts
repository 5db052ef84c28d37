// Spec, middleware-chain.md item 4: "ThreadDataMiddleware - Creates per-thread directories under
// the user's isolation scope (backend/.deer-flow/users/{user_id}/threads/{thread_id}/user-data/
// {workspace,uploads,outputs})". Here the sentence is met by the storage layout rather than by the
// middleware (src/middlewares/thread-data.ts says why): ThreadData records the three virtual
// folders, and the one path to the thread's files, acquireRunSandbox, hands out a sandbox whose
// three folders exist, empty, in that user's and thread's own storage (on the host, for the local
// sandbox, exactly at users/{user_id}/threads/{thread_id}/user-data/{workspace,uploads,outputs}).
import { mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HumanMessage } from "@langchain/core/messages";
import { afterEach, describe, expect, it } from "vitest";
import { createLocalSandboxProvider } from "../../../adapters/shared/local-sandbox.ts";
import type { AgentMiddleware, AgentRuntime, HookResult, NodeHook } from "../../../src/engine/types.ts";
import { createThreadDataMiddleware } from "../../../src/middlewares/thread-data.ts";
import type { SandboxProvider } from "../../../src/ports/sandbox.ts";
import { acquireRunSandbox } from "../../../src/sandbox/acquire.ts";
import { createVirtualSandboxProvider } from "../../../src/sandbox/virtual.ts";
import { emptyThreadState } from "../../../src/state/thread-state.ts";
import type { ThreadDataState } from "../../../src/state/types.ts";
import { makeRuntime } from "../../middlewares/runtime.ts";
import { currentRunner, runtime as runtimeName } from "../current-runner.ts";


const FOLDERS = ["workspace", "uploads", "outputs"] as const;

function threadDataOf(middleware: AgentMiddleware, runtime: AgentRuntime): ThreadDataState {
  const hook = middleware.beforeAgent;
  const fn = (typeof hook === "function" ? hook : hook?.hook) as NodeHook;
  const result = fn({ ...emptyThreadState(), messages: [new HumanMessage({ content: "hi", id: "m1" })] }, runtime) as Exclude<HookResult, void>;
  return result!.thread_data as ThreadDataState;
}

const runFor = (provider: SandboxProvider, userId: string, threadId: string): AgentRuntime =>
  makeRuntime({ context: { user_id: userId }, threadId, services: { sandbox: provider } });

let cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

async function localProvider(): Promise<{ provider: SandboxProvider; root: string }> {
  const root = await mkdtemp(join(tmpdir(), "deerflow-thread-data-"));
  const provider = createLocalSandboxProvider({ rootDir: root, runner: currentRunner() });
  cleanup.push(async () => {
    await provider.close();
    await rm(root, { recursive: true, force: true });
  });
  return { provider, root };
}

describe(`ThreadData's per-thread folders (${runtimeName})`, () => {
  const threadData = createThreadDataMiddleware();

  it.each(["virtual", "local"] as const)(
    '"Creates per-thread directories under the user\'s isolation scope": with the %s sandbox, the folders ThreadData records exist, empty, when the run first reaches its files',
    async (kind) => {
      const provider = kind === "virtual" ? createVirtualSandboxProvider() : (await localProvider()).provider;
      if (kind === "virtual") cleanup.push(() => provider.close());
      const run = runFor(provider, "u1", "t1");
      const paths = threadDataOf(threadData, run);
      expect(Object.values(paths)).toEqual(FOLDERS.map((name) => `/mnt/user-data/${name}`));

      const sandbox = await acquireRunSandbox(run);
      expect(sandbox.scope).toEqual({ userId: "u1", threadId: "t1" });
      for (const folder of [paths.workspace_path, paths.uploads_path, paths.outputs_path]) {
        expect(await sandbox.exists(folder), folder).toBe(true);
        expect(await sandbox.list(folder, { depth: 1 }), folder).toEqual([]);
      }

      // The user's isolation scope: another user's thread of the same id, and the user's other thread, are other folders.
      await sandbox.writeFile(`${paths.outputs_path}/report.md`, "u1's report");
      for (const [userId, threadId] of [["u2", "t1"], ["u1", "t2"]] as const) {
        const elsewhere = await acquireRunSandbox(runFor(provider, userId, threadId));
        expect(await elsewhere.exists(`${paths.outputs_path}/report.md`), `${userId}/${threadId}`).toBe(false);
        expect(await elsewhere.list(paths.outputs_path, { depth: 1 })).toEqual([]);
      }
    },
  );

  it("with the local sandbox they are the host folders users/{user_id}/threads/{thread_id}/user-data/{workspace,uploads,outputs}", async () => {
    const { provider, root } = await localProvider();
    const run = runFor(provider, "u1", "t1");
    threadDataOf(threadData, run);
    await acquireRunSandbox(run);
    expect(await readdir(join(root, "users"))).toEqual(["u1"]);
    expect(await readdir(join(root, "users", "u1", "threads"))).toEqual(["t1"]);
    expect(await readdir(join(root, "users", "u1", "threads", "t1"))).toEqual(["user-data"]);
    const userData = join(root, "users", "u1", "threads", "t1", "user-data");
    expect((await readdir(userData)).sort()).toEqual([...FOLDERS].sort());
    for (const name of FOLDERS) expect((await stat(join(userData, name))).isDirectory(), name).toBe(true);
  });
});
