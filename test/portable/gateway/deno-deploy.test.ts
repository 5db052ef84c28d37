// deploy/deno-deploy.ts as a user deploys it: `deno serve` (the project's deno binary, whatever
// runtime runs this file) with exactly Deno Deploy's permissions, --allow-net --allow-env
// --allow-read --unstable-kv (no --allow-write, --allow-run or --allow-sys), configured by
// environment variables only, from an empty working folder. The model is the replay server of
// recorded OpenAI traffic; the official @langchain/langgraph-sdk Client drives it over the socket
// with an API key: a streamed run with tools on thread A, a run on thread B, SIGKILL, a restart on
// the same Deno KV (Deno's default database, no path: what Deploy gives), then both threads' state
// and history. And the refusals: no auth, a missing model key, a malformed variable, each one line
// naming the variable, non-zero exit, nothing listening; a request without the key is a 401.
import { mkdir, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@langchain/langgraph-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEPLOY_ENV } from "../../../src/cli/deploy-env.ts";
import { loadFixtures, startReplayServer, type ReplayServer } from "../openai-replay.ts";
import { currentRuntime, DENO_BINARY, DENO_DEPLOY_FLAGS, denoDeployCommand, runToExit, startDenoDeploy, type CliServer } from "./cli-server.ts";

const runtime = currentRuntime();
const AGENT_FIXTURES = fileURLToPath(new URL("../../fixtures/openai/agent/", import.meta.url));
const GATEWAY_KEY = "deploy-test-key-0123456789abcdef";
const MODEL_KEY = "sk-test-123";
const NOTE_PATH = "/mnt/user-data/outputs/deploy-note.md";
const NOTE = "Deno Deploy keeps every thread in Deno KV.\n";

type Message = { type: string; content: unknown; name?: string; tool_calls?: Array<{ name: string; args: Record<string, unknown> }> };
type Values = { messages: Message[] };

/** `deno serve deploy/deno-deploy.ts` to its end (it should not start): exit code and its output. */
function runDeployToExit(env: Record<string, string>, cwd: string, denoFlags?: readonly string[]): Promise<{ code: number | null; out: string }> {
  const { command, args } = denoDeployCommand(denoFlags ? { denoFlags } : {});
  return runToExit(command, args, { cwd, env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env } });
}

const textOf = (message: Message) => (typeof message.content === "string" ? message.content : JSON.stringify(message.content));
const summary = (messages: Message[]) => messages.map((m) => [m.type, textOf(m), ...(m.tool_calls?.length ? [m.tool_calls.map((c) => c.name)] : [])]);

describe(`deploy/deno-deploy.ts under deno serve with Deploy's permissions (driven from ${runtime})`, () => {
  let replay: ReplayServer;
  let denoDir: string;
  let cwd: string;
  let env: Record<string, string>;

  beforeAll(async () => {
    replay = await startReplayServer([...loadFixtures(AGENT_FIXTURES), ...loadFixtures()]);
    // Deno keeps its default KV database (location_data) under DENO_DIR: a temp one, not the user's.
    denoDir = await mkdtemp(join(tmpdir(), "deerflow-deploy-deno-dir-"));
    cwd = await mkdtemp(join(tmpdir(), "deerflow-deploy-cwd-"));
    env = {
      DENO_DIR: denoDir,
      [DEPLOY_ENV.apiKey]: GATEWAY_KEY,
      [DEPLOY_ENV.model]: "gpt-4o-mini",
      [DEPLOY_ENV.modelBaseUrl]: replay.baseUrl,
      [DEPLOY_ENV.modelApiKey]: MODEL_KEY,
    };
  });
  afterAll(async () => {
    await replay?.close();
    if (denoDir) await rm(denoDir, { recursive: true, force: true });
    if (cwd) await rm(cwd, { recursive: true, force: true });
  });

  it("a streamed run with tools on thread A and a run on thread B survive a SIGKILL: state and history read back through the SDK", async () => {
    let server: CliServer | undefined = await startDenoDeploy(env, { cwd });
    let threadA: string, threadB: string;
    let beforeA: Message[], beforeB: Message[];
    let historyA: string[], historyB: string[];
    try {
      const client = new Client({ apiUrl: `${server.url}/api`, apiKey: GATEWAY_KEY });
      threadA = (await client.threads.create()).thread_id;
      const events: string[] = [];
      const tokens: string[] = [];
      let last: Values | undefined;
      for await (const part of client.runs.stream(threadA, "lead_agent", {
        input: { messages: [{ type: "human", content: "Write a deploy note to the outputs folder, then count its bytes." }] },
        streamMode: ["values", "messages-tuple"],
      })) {
        events.push(part.event);
        if (part.event === "values") last = part.data as Values;
        if (part.event === "messages") {
          const [chunk] = part.data as unknown as [{ type?: string; content?: unknown }];
          if (/^ai|^AIMessageChunk$/i.test(chunk.type ?? "") && typeof chunk.content === "string" && chunk.content !== "") tokens.push(chunk.content);
        }
      }
      expect(events, server.output()).not.toContain("error");
      // Tokens arrived as the model streamed them, not only the final values.
      expect(tokens.join("")).toBe("The note is written (43 bytes) and kept in Deno KV.");
      beforeA = last!.messages;
      // The lead agent's context note (date, workspace) comes first, as a system message.
      const talkA = beforeA.filter((m) => m.type !== "system");
      expect(talkA.map((m) => m.type)).toEqual(["human", "ai", "tool", "ai", "tool", "ai"]);
      expect(talkA[1]!.tool_calls!.map((c) => [c.name, c.args])).toEqual([["write_file", { path: NOTE_PATH, content: NOTE }]]);
      expect(textOf(talkA[2]!)).toBe("OK");
      expect(talkA[3]!.tool_calls!.map((c) => c.name)).toEqual(["bash"]);
      // The virtual sandbox ran wc over the file write_file had written: 43 bytes.
      expect(textOf(talkA[4]!)).toMatch(new RegExp(`^\\s*43 ${NOTE_PATH}`));
      expect(textOf(talkA[5]!)).toBe("The note is written (43 bytes) and kept in Deno KV.");
      // The model was called with its key, from DEERFLOW_MODEL_API_KEY.
      expect(replay.received.filter((r) => r.fixture?.match(/^\d-/)).map((r) => r.headers.authorization)).toEqual(Array(3).fill(`Bearer ${MODEL_KEY}`));

      threadB = (await client.threads.create()).thread_id;
      // A second run, on its own thread: the recorded streamed text answer (test/fixtures/openai/stream-text.json).
      let lastB: Values | undefined;
      for await (const part of client.runs.stream(threadB, "lead_agent", {
        input: { messages: [{ type: "human", content: "Write a haiku about a quiet server." }] },
        streamMode: ["values", "messages-tuple"],
      })) {
        expect(part.event, JSON.stringify(part.data)).not.toBe("error");
        if (part.event === "values") lastB = part.data as Values;
      }
      beforeB = lastB!.messages;
      const talkB = beforeB.filter((m) => m.type !== "system");
      expect(talkB.map((m) => m.type)).toEqual(["human", "ai"]);
      expect(textOf(talkB[1]!)).toMatch(/^Quiet server/);

      historyA = (await client.threads.getHistory(threadA, { limit: 100 })).map((s) => s.checkpoint.checkpoint_id!);
      historyB = (await client.threads.getHistory(threadB, { limit: 100 })).map((s) => s.checkpoint.checkpoint_id!);
      expect(historyA.length).toBeGreaterThanOrEqual(6);
      expect(historyB.length).toBeGreaterThanOrEqual(2);
      expect(server.output()).not.toMatch(/Requires (sys|write|run) access|NotCapable|PermissionDenied/);
    } finally {
      await server.kill();
    }
    expect(server.child.signalCode).toBe("SIGKILL");

    server = await startDenoDeploy(env, { cwd });
    try {
      const client = new Client({ apiUrl: `${server.url}/api`, apiKey: GATEWAY_KEY });
      const stateA = await client.threads.getState<Values>(threadA);
      const stateB = await client.threads.getState<Values>(threadB);
      expect(summary(stateA.values.messages)).toEqual(summary(beforeA));
      expect(summary(stateB.values.messages)).toEqual(summary(beforeB));
      expect(stateA.values.messages.filter((m) => m.type === "tool").map(textOf)).toEqual(["OK", expect.stringMatching(/^\s*43 /)]);
      expect((await client.threads.getHistory(threadA, { limit: 100 })).map((s) => s.checkpoint.checkpoint_id)).toEqual(historyA);
      expect((await client.threads.getHistory(threadB, { limit: 100 })).map((s) => s.checkpoint.checkpoint_id)).toEqual(historyB);
      // The sandbox's files live in Deno KV too: the note write_file wrote is served after the restart.
      const note = await fetch(`${server.url}/api/threads/${threadA}/artifacts${NOTE_PATH}`, { headers: { "x-api-key": GATEWAY_KEY } });
      expect(note.status, server.output()).toBe(200);
      expect(await note.text()).toBe(NOTE);
      // Without the key, the same thread is refused: 401 with a JSON detail.
      const anonymous = new Client({ apiUrl: `${server.url}/api` });
      await expect(anonymous.threads.getState(threadA)).rejects.toThrow(/401/);
      const bare = await fetch(`${server.url}/api/threads/${threadA}/state`);
      expect(bare.status).toBe(401);
      expect(((await bare.json()) as { detail: { code: string } }).detail.code).toBe("not_authenticated");
      const wrongKey = await fetch(`${server.url}/api/threads/${threadA}/state`, { headers: { "x-api-key": "not-the-key-0123456789" } });
      expect(wrongKey.status).toBe(401);
      await wrongKey.body?.cancel();
      // /api/ok stays open for health checks.
      expect((await fetch(`${server.url}/api/ok`)).status).toBe(200);
    } finally {
      await server.kill();
    }
    // Nothing was written to the working folder (nor could be: no --allow-write).
    expect(await readdir(cwd)).toEqual([]);
  }, 240_000);

  it("SIGTERM drains: the process itself settles (finishes or interrupts) and saves the run in flight and exits 0; the restart reads it", async () => {
    let server = await startDenoDeploy(env, { cwd });
    let threadId: string, runId: string;
    try {
      const client = new Client({ apiUrl: `${server.url}/api`, apiKey: GATEWAY_KEY });
      threadId = (await client.threads.create()).thread_id;
      const slowCalls = () => replay.received.filter((r) => r.fixture === "slow-text.json").length;
      const before = slowCalls();
      // The recorded slow answer (test/fixtures/openai/slow-text.json) comes 3 s after the request.
      runId = (await client.runs.create(threadId, "lead_agent", { input: { messages: [{ type: "human", content: "Please take your time with this one." }] } })).run_id;
      for (let waited = 0; slowCalls() === before; waited += 50) {
        if (waited > 60_000) throw new Error(`the model was never called:\n${server.output()}`);
        await new Promise((resolveWait) => setTimeout(resolveWait, 50));
      }
      const exited = new Promise<{ code: number | null; signal: string | null }>((resolveExit, reject) => {
        const timer = setTimeout(() => reject(new Error(`still running 30 s after SIGTERM:\n${server.output()}`)), 30_000);
        server.child.once("exit", (code, signal) => {
          clearTimeout(timer);
          resolveExit({ code, signal });
        });
      });
      server.child.kill("SIGTERM");
      // Deno's node:child_process reports a child it sent SIGTERM as killed by it (code null) even
      // when the child handled it and exited 0; Node and Bun report the exit code.
      expect(await exited, server.output()).toEqual(runtime === "deno" ? { code: null, signal: "SIGTERM" } : { code: 0, signal: null });
      expect(server.output()).toContain("stopping: draining runs");
    } finally {
      await server.kill();
    }
    server = await startDenoDeploy(env, { cwd });
    try {
      const client = new Client({ apiUrl: `${server.url}/api`, apiKey: GATEWAY_KEY });
      // The drain settled the run and saved it itself: not found orphaned by the next process. Deploy
      // runs many isolates, so the entry drains as one worker of several: the run may finish within
      // the budget (the answer comes 3 s after the call) or, if it could not, was interrupted.
      const run = await client.runs.get(threadId, runId);
      const events = (await (await fetch(`${server.url}/api/threads/${threadId}/runs/${runId}/events`, { headers: { "x-api-key": GATEWAY_KEY } })).json()) as Array<{
        kind: string;
        data: { status?: string; reason?: string; error?: unknown };
      }>;
      expect(["success", "interrupted"]).toContain(run.status);
      const statuses = events.filter((e) => e.kind === "status");
      expect(statuses.map((e) => e.data.status)).toEqual(["pending", "running", run.status]);
      expect(JSON.stringify(statuses.at(-1)!.data)).not.toMatch(/restart|sweep|lease/i);
      const state = await client.threads.getState<Values>(threadId);
      expect(state.values.messages.filter((m) => m.type === "human").map(textOf)).toEqual(["Please take your time with this one."]);
    } finally {
      await server.kill();
    }
  }, 180_000);

  it("DEERFLOW_KV_PATH: a local KV file, written only where --allow-write names its folder, coordinates the runs (admission records in KV) and keeps a thread across a restart", async () => {
    const dir = await mkdtemp(join(tmpdir(), "deerflow-deploy-kv-"));
    try {
      await mkdir(join(dir, "data"));
      const fileEnv = { ...env, [DEPLOY_ENV.kvPath]: "data/deerflow.kv" };
      // Deno KV on a file is SQLite: the file and its -wal and -shm files beside it. Without write
      // access to that folder the entry stops with Deno's own message naming the file.
      const refused = await runDeployToExit(fileEnv, dir);
      expect(refused.code).not.toBe(0);
      expect(refused.out).toMatch(/Requires write access to ".*deerflow\.kv"/);
      expect(refused.out).not.toMatch(/Listening on/);

      const flags = [...DENO_DEPLOY_FLAGS, `--allow-write=${join(dir, "data")}`];
      let server = await startDenoDeploy(fileEnv, { cwd: dir, denoFlags: flags });
      let threadId: string;
      let runId: string;
      try {
        const client = new Client({ apiUrl: `${server.url}/api`, apiKey: GATEWAY_KEY });
        threadId = (await client.threads.create({ metadata: { kept: "in a file" } })).thread_id;
        runId = "";
        for await (const part of client.runs.stream(threadId, "lead_agent", {
          input: { messages: [{ type: "human", content: "Write a deploy note to the outputs folder, then count its bytes." }] },
          streamMode: ["values", "messages-tuple"],
        })) {
          if (part.event === "metadata") runId = (part.data as { run_id: string }).run_id;
        }
      } finally {
        await server.kill();
      }
      // The entry coordinates its runs through Deno KV (what Deploy's isolates share), not in its
      // own memory: the run's admission record is in the database, settled, with its lease owner.
      const listed = await runToExit(
        DENO_BINARY,
        [
          "eval",
          "--unstable-kv",
          `--allow-read=${join(dir, "data")}`,
          `--allow-write=${join(dir, "data")}`,
          `const kv = await Deno.openKv(${JSON.stringify(join(dir, "data/deerflow.kv"))}); const rows = []; ` +
            `for await (const e of kv.list({ prefix: ["runs", "state", ${JSON.stringify(threadId)}] })) rows.push({ key: e.key, value: e.value }); ` +
            "kv.close(); console.log(JSON.stringify(rows));",
        ],
        { cwd: dir, env: { PATH: process.env.PATH, HOME: process.env.HOME, DENO_DIR: env.DENO_DIR } },
      );
      expect(listed.code, listed.out).toBe(0);
      const rows = JSON.parse(listed.out.trim().split("\n").at(-1)!) as Array<{ key: unknown[]; value: { status?: string; worker?: unknown } }>;
      expect(rows.map((row) => row.key)).toEqual([["runs", "state", threadId, runId]]);
      expect(rows[0]!.value.status, JSON.stringify(rows[0]!.value)).toBe("success");
      server = await startDenoDeploy(fileEnv, { cwd: dir, denoFlags: flags });
      try {
        const client = new Client({ apiUrl: `${server.url}/api`, apiKey: GATEWAY_KEY });
        expect((await client.threads.get(threadId)).metadata).toMatchObject({ kept: "in a file" });
      } finally {
        await server.kill();
      }
      expect((await readdir(join(dir, "data"))).sort()[0]).toBe("deerflow.kv");
      expect(await readdir(dir)).toEqual(["data"]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 180_000);

  it("refuses to start without auth: exit non-zero, one line naming the variables to set, nothing listening", async () => {
    const { [DEPLOY_ENV.apiKey]: _key, ...noAuth } = env;
    const { code, out } = await runDeployToExit(noAuth, cwd);
    expect(code).not.toBe(0);
    expect(out).toMatch(/^error: No authentication configured/m);
    for (const name of [DEPLOY_ENV.apiKey, DEPLOY_ENV.adminPasswordHash, DEPLOY_ENV.authMode]) expect(out).toContain(name);
    expect(out).not.toMatch(/Listening on/);
    expect(out).not.toMatch(/\n\s+at /);
  }, 120_000);

  it("refuses a missing model key, a malformed variable and a Deno without --unstable-kv, naming what to set", async () => {
    const { [DEPLOY_ENV.modelApiKey]: _key, ...noModelKey } = env;
    const missing = await runDeployToExit(noModelKey, cwd);
    expect(missing.code).not.toBe(0);
    expect(missing.out).toMatch(/^error: DEERFLOW_MODEL is set but no key for it: set DEERFLOW_MODEL_API_KEY .* or DEERFLOW_MODEL_API_KEY_ENV/m);
    expect(missing.out).not.toMatch(/Listening on/);

    const namedButUnset = await runDeployToExit({ ...noModelKey, [DEPLOY_ENV.modelApiKeyEnv]: "MY_PROVIDER_KEY" }, cwd);
    expect(namedButUnset.code).not.toBe(0);
    expect(namedButUnset.out).toMatch(/^error: DEERFLOW_MODEL_API_KEY_ENV names MY_PROVIDER_KEY, which is not set/m);

    const badUrl = await runDeployToExit({ ...env, [DEPLOY_ENV.modelBaseUrl]: "api.example.com/v1" }, cwd);
    expect(badUrl.code).not.toBe(0);
    expect(badUrl.out).toMatch(/^error: DEERFLOW_MODEL_BASE_URL: expected an http\(s\) URL/m);
    expect(badUrl.out).not.toMatch(/Listening on/);

    // Deno KV is an unstable API: started without it, the entry says which flag (or deno.json key) adds it.
    const noKv = await runDeployToExit(env, cwd, DENO_DEPLOY_FLAGS.filter((flag) => flag !== "--unstable-kv"));
    expect(noKv.code).not.toBe(0);
    expect(noKv.out).toMatch(/^error: storage\.driver "deno-kv" needs Deno KV, .*--unstable-kv .*"unstable": \["kv"\] to deno\.json/m);
    expect(noKv.out).not.toMatch(/Listening on/);

    const badMode = await runDeployToExit({ ...env, [DEPLOY_ENV.authMode]: "disabled" }, cwd);
    expect(badMode.code).not.toBe(0);
    expect(badMode.out).toMatch(/^error: DEERFLOW_AUTH_MODE: expected api_key or session, got "disabled"/m);
  }, 240_000);
});
