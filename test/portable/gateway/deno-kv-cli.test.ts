// The real CLI with `storage.driver: deno-kv`. On Deno: started with exactly the permissions Deno
// Deploy grants (--allow-net --allow-env --allow-read, plus --unstable-kv), no --allow-sys,
// --allow-write or --allow-run: a streamed run with tools and `run` over memory storage, then a
// 1 MB upload, an 80 KB message and a thread of 200 checkpoints over a local Deno KV file, each
// read back after the process was killed and started again; Deno's default KV (no path, no write
// permission at all, as on Deno Deploy) keeps a thread across a restart; the fs default without
// write permission is refused at start. On Node and Bun: the deno-kv config is refused with one
// sentence saying it needs Deno, and nothing listens.
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cliCommand, cliWorkspace, currentRuntime, DENO_DEPLOY_FLAGS, runToExit, type CliServer, type CliWorkspace } from "./cli-server.ts";
import { newThread, post, streamedRun } from "./cli-runs.ts";
import type { SseFrame } from "./runs-harness.ts";

const runtime = currentRuntime();

async function sha256(bytes: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

type Message = { type: string; content: unknown; tool_calls?: unknown[] };
const finalMessages = (frames: SseFrame[]): Message[] => (frames.findLast((f) => f.event === "values")!.data as { messages: Message[] }).messages;

/** `deerflow-edge <args>` as a child process to its end: exit code and everything it printed. */
function runCli(args: readonly string[], options: { cwd: string; denoFlags?: readonly string[] }): Promise<{ code: number | null; out: string }> {
  const { command, args: base } = cliCommand(runtime, options.denoFlags ? { denoFlags: options.denoFlags } : {}, args[0]!);
  return runToExit(command, [...base, ...args.slice(1)], { cwd: options.cwd, env: process.env });
}

if (runtime === "deno") {
  describe("the Deno CLI under Deno Deploy's permissions (--allow-net --allow-env --allow-read --unstable-kv)", () => {
    let workspace: CliWorkspace;
    beforeAll(async () => {
      workspace = await cliWorkspace({ storage: { driver: "memory" } }, {}, { denoFlags: DENO_DEPLOY_FLAGS });
    });
    afterAll(() => workspace?.dispose());

    it("serve: a streamed run with tools completes (no --allow-sys=homedir, no --allow-write, no --allow-run)", async () => {
      const server = await workspace.start();
      try {
        const threadId = await newThread(server);
        const frames = await streamedRun(server, threadId, "Write a note about budgets.");
        expect(frames.at(-1), server.output()).toMatchObject({ event: "end" });
        expect(frames.some((f) => f.event === "error"), JSON.stringify(frames.filter((f) => f.event === "error"))).toBe(false);
        const messages = finalMessages(frames);
        // The demo model called tools (write_file, bash), each answered by the virtual sandbox.
        expect(messages.filter((m) => m.type === "tool").length).toBeGreaterThanOrEqual(2);
        expect(messages.at(-1)!.type).toBe("ai");
        const runId = (frames[0]!.data as { run_id: string }).run_id;
        const run = (await (await fetch(`${server.url}/api/threads/${threadId}/runs/${runId}`)).json()) as { status: string };
        expect(run.status).toBe("success");
        expect(server.output()).not.toMatch(/Requires (sys|write|run) access/);
      } finally {
        await server.kill();
      }
    }, 120_000);

    it("the fs default without write permission is refused at start with one sentence naming the ways out", async () => {
      const fsWorkspace = await cliWorkspace({}, {}, { denoFlags: DENO_DEPLOY_FLAGS });
      try {
        const { code, out } = await runCli(["serve", "--port", "0", "--host", "127.0.0.1", "--config", fsWorkspace.configPath], { cwd: fsWorkspace.dir, denoFlags: DENO_DEPLOY_FLAGS });
        expect(code).not.toBe(0);
        expect(out).toContain('storage.driver "fs" writes under');
        expect(out).toMatch(/set storage\.driver to "deno-kv" \(with --unstable-kv\) or "memory"/);
        expect(out).not.toMatch(/deerflow-edge gateway ·/);
      } finally {
        await fsWorkspace.dispose();
      }
    }, 60_000);

    it("run: one task to its end in the terminal", async () => {
      const { code, out } = await runCli(["run", "--config", workspace.configPath, "add 2 and 3"], { cwd: workspace.dir, denoFlags: DENO_DEPLOY_FLAGS });
      expect(out).not.toMatch(/Requires (sys|write|run) access/);
      expect(code, out).toBe(0);
      expect(out).toMatch(/✓ write_file/);
      expect(out).toMatch(/✓ done in/);
    }, 120_000);
  });

  describe("the Deno CLI over a Deno KV file, killed and started again", () => {
    let workspace: CliWorkspace;
    beforeAll(async () => {
      // A local KV file is a SQLite file Deno writes (Deno Deploy's own KV needs no path and no
      // write permission): write access to its folder and nothing else, so any other write fails.
      const dir = await mkdtemp(join(tmpdir(), "deerflow-deno-kv-"));
      const kvDir = join(dir, "kv");
      await mkdir(kvDir);
      workspace = await cliWorkspace({}, {}, { denoFlags: [...DENO_DEPLOY_FLAGS, `--allow-write=${kvDir}`] });
      await writeFile(workspace.configPath, JSON.stringify({ storage: { driver: "deno-kv", path: join(kvDir, "deerflow.kv") } }));
      cleanup = () => rm(dir, { recursive: true, force: true });
    });
    let cleanup: () => Promise<void> = async () => undefined;
    afterAll(async () => {
      await workspace?.dispose();
      await cleanup();
    });

    it("keeps a 1 MB upload byte for byte, an 80 KB message and a thread of 200 checkpoints", async () => {
      const server = await workspace.start();
      const upload = new Uint8Array(1_048_576);
      for (let offset = 0; offset < upload.length; offset += 65_536) crypto.getRandomValues(upload.subarray(offset, offset + 65_536));
      const longText = `${"Ünïcödé budget line ✓ ".repeat(3_640)}`.slice(0, 80_000);
      let uploadThread: string, messageThread: string, historyThread: string;
      let historyIds: string[];
      try {
        uploadThread = await newThread(server);
        const form = new FormData();
        form.append("files", new File([upload as Uint8Array<ArrayBuffer>], "big.bin"));
        const uploaded = await fetch(`${server.url}/api/threads/${uploadThread}/uploads`, { method: "POST", body: form });
        expect(uploaded.status, server.output()).toBe(200);
        await uploaded.arrayBuffer();

        messageThread = await newThread(server);
        const frames = await streamedRun(server, messageThread, longText);
        expect(frames.at(-1), server.output()).toMatchObject({ event: "end" });
        expect(finalMessages(frames).filter((m) => m.content === longText).map((m) => m.type)).toEqual(["human"]);

        historyThread = await newThread(server);
        for (let n = 0; n < 200; n++) {
          const updated = await post(server, `/threads/${historyThread}/state`, { values: { messages: [{ type: "human", content: `note ${n}` }] } });
          expect(updated.status, await updated.clone().text()).toBe(200);
        }
        historyIds = await checkpointIds(server, historyThread);
        expect(historyIds).toHaveLength(200);
      } finally {
        await server.kill();
      }

      const restarted = await workspace.start();
      try {
        const served = await fetch(`${restarted.url}/api/threads/${uploadThread}/artifacts/mnt/user-data/uploads/big.bin`);
        expect(served.status, restarted.output()).toBe(200);
        expect(await sha256(new Uint8Array(await served.arrayBuffer()))).toBe(await sha256(upload));

        const state = (await (await fetch(`${restarted.url}/api/threads/${messageThread}/state`)).json()) as { values: { messages: Message[] } };
        expect(state.values.messages.filter((m) => m.content === longText).map((m) => m.type)).toEqual(["human"]);
        expect(state.values.messages.at(-1)!.type).toBe("ai");

        expect(await checkpointIds(restarted, historyThread)).toEqual(historyIds);
        const last = (await (await fetch(`${restarted.url}/api/threads/${historyThread}/state`)).json()) as { values: { messages: Message[] } };
        expect(last.values.messages.filter((m) => m.type === "human").map((m) => m.content)).toEqual(Array.from({ length: 200 }, (_, n) => `note ${n}`));
      } finally {
        await restarted.kill();
      }
    }, 240_000);

    it("Deno's default KV (no path, as on Deno Deploy) under exactly Deploy's flags keeps a thread across a restart", async () => {
      // DENO_DIR in a temp folder: Deno keeps its default database there (location_data), not in the user's.
      const denoDir = await mkdtemp(join(tmpdir(), "deerflow-deno-dir-"));
      const deploy = await cliWorkspace({ storage: { driver: "deno-kv" } }, { DENO_DIR: denoDir }, { denoFlags: DENO_DEPLOY_FLAGS });
      try {
        const server = await deploy.start();
        let threadId: string;
        let before: Message[];
        try {
          threadId = await newThread(server);
          const frames = await streamedRun(server, threadId, "Write a note about budgets.");
          expect(frames.at(-1), server.output()).toMatchObject({ event: "end" });
          before = finalMessages(frames);
          expect(before.filter((m) => m.type === "tool").length).toBeGreaterThanOrEqual(2);
        } finally {
          await server.kill();
        }
        const restarted = await deploy.start();
        try {
          const state = (await (await fetch(`${restarted.url}/api/threads/${threadId}/state`)).json()) as { values: { messages: Message[] } };
          expect(state.values.messages.map((m) => [m.type, m.content])).toEqual(before.map((m) => [m.type, m.content]));
        } finally {
          await restarted.kill();
        }
      } finally {
        await deploy.dispose();
        await rm(denoDir, { recursive: true, force: true });
      }
    }, 120_000);
  });
} else {
  describe(`storage.driver deno-kv on ${runtime}`, () => {
    it("is refused with one sentence saying it needs Deno, before anything listens", async () => {
      const workspace = await cliWorkspace({ storage: { driver: "deno-kv" } });
      try {
        const { code, out } = await runCli(["serve", "--port", "0", "--host", "127.0.0.1", "--config", workspace.configPath], { cwd: workspace.dir });
        expect(code).not.toBe(0);
        expect(out).toContain('storage.driver "deno-kv" needs Deno');
        expect(out).not.toMatch(/deerflow-edge gateway ·/);
        // One sentence, no stack trace.
        expect(out.trim().split("\n").filter((line) => line.includes("deno-kv"))).toHaveLength(1);
        expect(out).not.toMatch(/\n\s+at /);
      } finally {
        await workspace.dispose();
      }
    }, 60_000);
  });
}

/** Every checkpoint id of a thread, newest first, paging the history 100 at a time. */
async function checkpointIds(server: CliServer, threadId: string): Promise<string[]> {
  const ids: string[] = [];
  for (;;) {
    const page = (await (await post(server, `/threads/${threadId}/history`, { limit: 100, ...(ids.length ? { before: ids.at(-1) } : {}) })).json()) as Array<{ checkpoint: { checkpoint_id: string } }>;
    ids.push(...page.map((s) => s.checkpoint.checkpoint_id));
    if (page.length < 100) return ids;
  }
}
