// What a user of the one-file binary does: `node scripts/build-binary.mjs` (bun build --compile),
// copy the executable somewhere with no checkout and no node_modules, and run it from a folder of
// their own: `demo` (the virtual sandbox's worker must be inside the binary), `run` against an
// OpenAI-compatible provider (the replay server of recorded traffic), and `serve`, driven over a
// real port by the official LangGraph SDK client with one streamed run that calls a tool.
// Building takes a few seconds of CPU: once, here, in the Node suite.
import { execFile, spawn } from "node:child_process";
import { copyFile, mkdir, mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { Client } from "@langchain/langgraph-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServe } from "../portable/gateway/cli-server.ts";
import { loadFixtures, startReplayServer, type ReplayServer } from "../portable/openai-replay.ts";

const exec = promisify(execFile);
const repo = fileURLToPath(new URL("../..", import.meta.url));
const MINUTE = 60_000;
const AGENT_FIXTURES = fileURLToPath(new URL("../fixtures/openai/agent-bash/", import.meta.url));
const PROMPT = "Write a note to the workspace and read it back.";

let root = "";
let binary = "";
let home = "";
let provider: ReplayServer;

/** The binary with `args`, from `home`, to its end: exit code and everything it printed. */
function runBinary(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; out: string }> {
  return new Promise((resolveRun, reject) => {
    const child = spawn(binary, args, { cwd: home, env: { PATH: "/usr/bin:/bin", HOME: home, NO_COLOR: "1", ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout!.on("data", (chunk: Buffer) => (out += chunk.toString()));
    child.stderr!.on("data", (chunk: Buffer) => (out += chunk.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), MINUTE);
    child.once("error", reject);
    child.once("exit", (code) => {
      clearTimeout(timer);
      resolveRun({ code, out });
    });
  });
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "deerflow-binary-"));
  const built = join(root, "build", "deerflow-edge");
  await exec(process.execPath, [join(repo, "scripts/build-binary.mjs"), "--outfile", built], { cwd: repo, timeout: 4 * MINUTE, maxBuffer: 16 << 20 });
  // Away from the checkout: a folder with the executable alone, and a working folder of the user.
  binary = join(root, "opt", "deerflow-edge");
  home = join(root, "home");
  await mkdir(join(root, "opt"));
  await mkdir(home);
  await copyFile(built, binary);
  await rm(join(root, "build"), { recursive: true, force: true });
  await exec("chmod", ["+x", binary]);
  provider = await startReplayServer(loadFixtures(AGENT_FIXTURES));
  await writeFile(
    join(home, "config.yaml"),
    JSON.stringify({
      models: [{ name: "remote", use: "openai-compatible", model: "gpt-4o-mini", base_url: provider.baseUrl, api_key_env: "PROVIDER_KEY" }],
      llm_call: { retry_max_attempts: 1 },
    }),
  );
}, 5 * MINUTE);

afterAll(async () => {
  await provider?.close();
  if (root) await rm(root, { recursive: true, force: true });
});

describe("the bun --compile binary, copied away from the checkout", () => {
  it("is one executable file", async () => {
    expect((await stat(binary)).isFile()).toBe(true);
  });

  it("demo: the built-in task writes a file and runs bash in the virtual sandbox", async () => {
    const { code, out } = await runBinary(["demo", "--model", "demo"]);
    expect(out).not.toMatch(/Sandbox unavailable|ModuleNotFound|Cannot find/);
    expect(out).toMatch(/✓ write_file: OK/);
    expect(out).toMatch(/✓ bash: \d+ \/mnt\/user-data\/workspace\/notes\.md/);
    expect(out).toMatch(/✓ done in /);
    expect(code, out).toBe(0);
  }, 2 * MINUTE);

  it("run: one turn against an OpenAI-compatible provider, the model's bash call run in the sandbox", async () => {
    const before = provider.received.length;
    const { code, out } = await runBinary(["run", PROMPT], { PROVIDER_KEY: "sk-test-123" });
    expect(out).toContain("model remote");
    expect(out).toMatch(/✓ bash: edge-sandbox 42/);
    expect(out).toContain("The sandbox wrote the note and printed 42.");
    expect(code, out).toBe(0);
    const requests = provider.received.slice(before);
    expect(requests.map((r) => r.fixture)).toEqual(["stream-bash-call.json", "stream-tool-answer.json"]);
    expect(requests[0]!.headers.authorization).toBe("Bearer sk-test-123");
  }, 2 * MINUTE);

  it("serve: the official SDK streams a run with a tool call over a real port", async () => {
    const server = await startServe(binary, ["serve", "--port", "0", "--host", "127.0.0.1"], {
      cwd: home,
      env: { PATH: "/usr/bin:/bin", HOME: home, NO_COLOR: "1", PROVIDER_KEY: "sk-test-123" },
      label: "the compiled binary",
    });
    try {
      const client = new Client({ apiUrl: `${server.url}/api`, apiKey: null });
      const thread = await client.threads.create();
      const events: string[] = [];
      let last: { messages?: Array<{ type: string; content: unknown; tool_calls?: Array<{ name: string }> }> } = {};
      for await (const part of client.runs.stream(thread.thread_id, "lead_agent", {
        input: { messages: [{ type: "human", content: PROMPT }] },
        streamMode: ["values"],
      })) {
        events.push(part.event);
        if (part.event === "values") last = part.data as typeof last;
      }
      expect(events[0], server.output()).toBe("metadata");
      expect(events).toContain("values");
      expect(events).not.toContain("error");
      // The dated system reminder the harness injects is state too; the conversation is the rest.
      const conversation = (values: typeof last) => (values.messages ?? []).filter((m) => m.type !== "system");
      const messages = conversation(last);
      expect(messages.map((m) => m.type)).toEqual(["human", "ai", "tool", "ai"]);
      expect(messages[1]!.tool_calls?.map((c) => c.name)).toEqual(["bash"]);
      expect(String(messages[2]!.content)).toContain("edge-sandbox\n42");
      expect(messages[3]!.content).toBe("The sandbox wrote the note and printed 42.");
      const state = await client.threads.getState(thread.thread_id);
      expect(conversation(state.values as typeof last)).toEqual(messages);
    } finally {
      await server.kill();
    }
  }, 3 * MINUTE);
});
