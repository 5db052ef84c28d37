// The real CLI (`serve`, on Node) with storage.driver postgres over a real PostgreSQL: a thread and
// its run survive a SIGKILL; a database outage answers 503 with a clear message and the same
// process serves again once the database is back; an unreachable database or an unset url_env
// variable stops the start in one sentence, and nothing listens.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cliCommand, cliWorkspace, runToExit, type CliWorkspace } from "../portable/gateway/cli-server.ts";
import { newThread, streamedRun } from "../portable/gateway/cli-runs.ts";
import { freeLoopbackPort, startTestPostgres, type TestPostgres } from "../support/embedded-postgres.ts";

const POSTGRES = { storage: { driver: "postgres", url_env: "DATABASE_URL", pool_max: 4 } };

let server: TestPostgres;
let workspace: CliWorkspace;

beforeAll(async () => {
  server = await startTestPostgres();
  workspace = await cliWorkspace(POSTGRES, { DATABASE_URL: server.url });
}, 60_000);

afterAll(async () => {
  await workspace?.dispose();
  await server?.stop();
});

type Message = { type: string; content: unknown };

describe("serve with storage.driver postgres (node)", () => {
  it("a thread and its run are still there after the process is SIGKILLed and started again", async () => {
    const first = await workspace.start();
    const threadId = await newThread(first);
    const frames = await streamedRun(first, threadId, "Write a note about budgets.");
    expect(frames.at(-1), first.output()).toMatchObject({ event: "end" });
    const runId = (frames[0]!.data as { run_id: string }).run_id;
    await first.kill();

    const second = await workspace.start();
    try {
      const state = (await (await fetch(`${second.url}/api/threads/${threadId}/state`)).json()) as { values: { messages: Message[] } };
      expect(state.values.messages.find((m) => m.type === "human")).toMatchObject({ content: "Write a note about budgets." });
      expect(state.values.messages.at(-1)!.type).toBe("ai");
      const run = (await (await fetch(`${second.url}/api/threads/${threadId}/runs/${runId}`)).json()) as { status: string };
      expect(run.status, second.output()).toBe("success");
      // And the table holds them: PostgreSQL, not a file, is where they live.
      const { default: pg } = await import("pg");
      const client = new pg.Client({ connectionString: server.url });
      await client.connect();
      try {
        const rows = await client.query("SELECT count(*)::int AS n FROM checkpoints WHERE thread_id = $1", [threadId]);
        expect(rows.rows[0].n).toBeGreaterThan(0);
      } finally {
        await client.end();
      }
    } finally {
      await second.kill();
    }
  }, 120_000);

  it("the database stops: requests answer 503 with a clear message; it starts again: the same process answers 200", async () => {
    const cli = await workspace.start();
    try {
      const threadId = await newThread(cli);
      await server.halt();
      const down = await fetch(`${cli.url}/api/threads/${threadId}`);
      expect(down.status, cli.output()).toBe(503);
      expect(down.headers.get("retry-after")).toBe("1");
      const body = (await down.json()) as { detail: string; code: string };
      expect(body.code).toBe("storage_unavailable");
      expect(body.detail).toContain(`PostgreSQL at 127.0.0.1:${server.port} (database deerflow) cannot be reached`);
      expect(body.detail).not.toContain(server.password);
      await server.resume();
      const up = await fetch(`${cli.url}/api/threads/${threadId}`);
      expect(up.status, cli.output()).toBe(200);
      expect(((await up.json()) as { thread_id: string }).thread_id).toBe(threadId);
      expect(cli.child.exitCode).toBeNull();
    } finally {
      await cli.kill();
    }
  }, 60_000);

  it("PostgreSQL unreachable at start: one sentence naming host:port and database, never the password; nothing listens", async () => {
    const port = await freeLoopbackPort();
    const { command, args } = cliCommand("node");
    const result = await runToExit(command, [...args, "--port", "0", "--host", "127.0.0.1", "--config", workspace.configPath], {
      cwd: workspace.dir,
      env: { ...process.env, DATABASE_URL: `postgres://deerflow:hunter2-secret@127.0.0.1:${port}/appdb` },
    });
    expect(result.code).toBe(1);
    expect(result.out).toContain(`error: Could not connect to PostgreSQL at 127.0.0.1:${port} (database appdb): connect ECONNREFUSED`);
    expect(result.out).not.toContain("hunter2-secret");
    expect(result.out).not.toContain("deerflow-edge gateway ·");
  }, 60_000);

  it("url_env's variable unset: one sentence naming it; nothing listens", async () => {
    const { command, args } = cliCommand("node");
    const env = { ...process.env };
    delete env.DATABASE_URL;
    const result = await runToExit(command, [...args, "--port", "0", "--host", "127.0.0.1", "--config", workspace.configPath], { cwd: workspace.dir, env });
    expect(result.code).toBe(1);
    expect(result.out).toContain('error: storage.driver "postgres" reads its connection URL from DATABASE_URL, which is not set');
    expect(result.out).not.toContain("deerflow-edge gateway ·");
  }, 60_000);
});
