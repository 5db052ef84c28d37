import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { createModuleLoader } from "../../../adapters/shared/module-loader.ts";
import { startTestMcpServer } from "../../mcp/http-server.ts";
import { describe, expect, it } from "vitest";
import type { CliHost } from "../../../src/cli/host.ts";
import { main } from "../../../src/cli/main.ts";
import { systemClock } from "../../../src/core/clock.ts";
import { mapEnv } from "../../../src/core/env.ts";
import type { KeyValue } from "../../../src/ports/key-value.ts";
import { createVirtualSandboxProvider } from "../../../src/sandbox/virtual.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { KeyValueCheckpointSaver } from "../../../src/runtime/kv-checkpointer.ts";
import type { BaseMessage } from "@langchain/core/messages";
import { runtimeServe } from "../gateway/runtime-serve.ts";

const { serve } = await runtimeServe();

interface FakeHost extends CliHost {
  out: string[];
  err: string[];
  storage: KeyValue;
}

function fakeHost(argv: string[], files: Record<string, string> = {}, options: { isTTY?: boolean; storage?: KeyValue } = {}): FakeHost {
  const out: string[] = [];
  const err: string[] = [];
  const storage = options.storage ?? createMemoryKeyValue();
  return {
    argv,
    env: mapEnv({}),
    clock: systemClock,
    out,
    err,
    storage,
    stdout: { write: (t) => void out.push(t), isTTY: options.isTTY ?? false },
    stderr: { write: (t) => void err.push(t), isTTY: false },
    readFile: async (path) => files[path],
    createStorage: () => storage,
    createSandboxProvider: (_config, kv) => createVirtualSandboxProvider({ storage: kv }),
    onInterrupt: () => () => {},
    serve,
    createModuleLoader: (baseDir) => createModuleLoader({ baseDir }),
    dirname,
  };
}

const fixtures = `${dirname(fileURLToPath(import.meta.url))}/../../fixtures/extensions`;

async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe("deerflow-edge run", () => {
  it("streams tokens, each tool call with a short result, and ends with usage and time", async () => {
    const host = fakeHost(["run", "Write a note about Deno and count its words."]);
    const code = await main(host);
    const text = host.out.join("");
    expect(code).toBe(0);
    expect(host.err.join("")).toBe("");
    expect(text).toContain("model demo (built-in demo model");
    expect(text).toMatch(/→ write_file\(path: \/mnt\/user-data\/workspace\/notes\.md\)/);
    expect(text).toMatch(/✓ write_file: /);
    expect(text).toMatch(/→ bash\(command: wc -w/);
    expect(text).toMatch(/✓ bash: \d+ \/mnt\/user-data\/workspace\/notes\.md/);
    expect(text).toContain("… thinking (model step 1)");
    const lines = text.trimEnd().split("\n");
    expect(lines.at(-2)).toMatch(/^✓ done in \d+\.\ds · tokens in \d+ \/ out \d+ \/ total \d+/);
    // Tokens arrive as separate writes, not one final block.
    const finalAnswerWrites = host.out.filter((w) => !w.includes("\n") && w.trim().length > 0);
    expect(finalAnswerWrites.length).toBeGreaterThan(10);
  });

  it("continues a conversation on --thread: the second run sees the first run's messages and files", async () => {
    const storage = createMemoryKeyValue();
    const first = fakeHost(["run", "Write a note about Bun.", "--thread", "t-cli"], {}, { storage });
    expect(await main(first)).toBe(0);
    const second = fakeHost(["run", "Write another note about Bun.", "--thread", "t-cli"], {}, { storage });
    expect(await main(second)).toBe(0);
    const saved = await new KeyValueCheckpointSaver({ storage }).getTuple({ configurable: { thread_id: "t-cli", checkpoint_ns: "" } });
    const messages = (saved?.checkpoint.channel_values.messages ?? []) as BaseMessage[];
    const prompts = messages.filter((m) => m.getType() === "human").map((m) => m.content);
    expect(prompts).toEqual(["Write a note about Bun.", "Write another note about Bun."]);
    expect(second.out.join("")).toContain("--thread t-cli");
    // The second note would overwrite a file this conversation never read: ReadBeforeWrite stops it.
    expect(second.out.join("")).toMatch(/✗ write_file: Error: write_file blocked/);
    const sandbox = await createVirtualSandboxProvider({ storage }).acquire({ userId: "default", threadId: "t-cli" });
    expect(await sandbox.readFile("/mnt/user-data/workspace/notes.md")).toContain("Write a note about Bun.");
  });

  it("draws a spinner on a terminal while it waits", async () => {
    const host = fakeHost(["demo"], {}, { isTTY: true });
    expect(await main(host)).toBe(0);
    expect(host.out.some((w) => w.includes("\r\x1b[2K"))).toBe(true);
  });

  it("names an unknown model in one sentence and exits non-zero", async () => {
    const host = fakeHost(["run", "hi", "--model", "gpt-9"]);
    expect(await main(host)).toBe(1);
    const err = host.err.join("");
    expect(err.trim().split("\n")).toHaveLength(1);
    expect(err).toMatch(/Unknown model "gpt-9"; available models: "demo"/);
  });

  it("refuses a config that is not YAML or breaks its schema before anything starts", async () => {
    const notYaml = fakeHost(["run", "hi", "--config", "c.yaml"], { "c.yaml": "models: [\n" });
    expect(await main(notYaml)).toBe(1);
    expect(notYaml.err.join("")).toMatch(/^error: c\.yaml: not valid YAML \(line \d+, column \d+\)/);
    expect(notYaml.out.join("")).toBe("");

    const badKey = fakeHost(["run", "hi", "--config", "c.yaml"], { "c.yaml": "models:\n  - name: m\n    use: demo\n    api_key_env: 5\n" });
    expect(await main(badKey)).toBe(1);
    expect(badKey.err.join("")).toContain("c.yaml: models[0].api_key_env: expected string");
    expect(await badKey.storage.getKeys()).toEqual([]);
  });

  it("says so when the named config file does not exist", async () => {
    const host = fakeHost(["run", "hi", "--config", "nope.yaml"]);
    expect(await main(host)).toBe(1);
    expect(host.err.join("")).toContain("Config file nope.yaml does not exist");
  });

  it("names the provider URL when the provider cannot be reached", async () => {
    const port = await closedPort();
    // One attempt: the retries themselves are LLMErrorHandling's tests.
    const config = `llm_call:\n  retry_max_attempts: 1\nmodels:\n  - name: remote\n    use: openai-compatible\n    model: gpt-4o-mini\n    base_url: http://127.0.0.1:${port}/v1\n`;
    const host = fakeHost(["run", "hi", "--config", "c.yaml"], { "c.yaml": config });
    expect(await main(host)).toBe(1);
    const err = host.err.join("").trim();
    expect(err.split("\n")).toHaveLength(1);
    expect(err).toContain(`http://127.0.0.1:${port}/v1`);
  });

  it("loads the config's extension middlewares into the chain (scenario M60)", async () => {
    const config = `extensions:\n  middlewares:\n    - ./cli-marker.ts:createAuditedResults\n`;
    const host = fakeHost(["run", "Write a note about Deno.", "--config", `${fixtures}/config.yaml`], { [`${fixtures}/config.yaml`]: config });
    expect(await main(host)).toBe(0);
    expect(host.out.join("")).toMatch(/✓ write_file: \[audited\] /);
  });

  it("refuses to start when an extension middleware entry is broken, naming it", async () => {
    const config = `extensions:\n  middlewares:\n    - ./missing.ts:Nothing\n`;
    const host = fakeHost(["run", "hi", "--config", `${fixtures}/config.yaml`], { [`${fixtures}/config.yaml`]: config });
    expect(await main(host)).toBe(1);
    const err = host.err.join("").trim();
    expect(err.split("\n")).toHaveLength(1);
    expect(err).toContain("./missing.ts:Nothing");
    expect(host.out.join("")).toBe("");
  });

  it("binds the tools of the MCP servers in extensions_config.json and reports one it cannot reach", async () => {
    const server = await startTestMcpServer();
    const port = await closedPort();
    try {
      const extensions = JSON.stringify({
        mcpServers: {
          good: { type: "http", url: server.url },
          gone: { type: "http", url: `http://127.0.0.1:${port}/mcp` },
        },
      });
      const dir = "/virtual-config";
      const host = fakeHost(["run", "Write a note about MCP.", "--config", `${dir}/config.yaml`], {
        [`${dir}/config.yaml`]: "",
        [`${dir}/extensions_config.json`]: extensions,
      });
      expect(await main(host)).toBe(0);
      const err = host.err.join("");
      expect(err).toMatch(/warning: MCP server gone left out/);
      expect(err).not.toMatch(/server good/);
      expect(server.stats.opened).toBeGreaterThan(0);
    } finally {
      await server.close();
    }
  });

  it("acts as the run worker for plugins: task start and stop with the outcome", async () => {
    const plugins = `${dirname(fileURLToPath(import.meta.url))}/../../fixtures/plugins/lifecycle-recorder.ts`;
    const { lifecycleLog } = await import("../../fixtures/plugins/lifecycle-recorder.ts");
    const config = `plugins:\n  - use: ${plugins}:install\n`;
    const host = fakeHost(["run", "Write a note.", "--thread", "t-plug", "--config", "/c/config.yaml"], { "/c/config.yaml": config });
    expect(await main(host)).toBe(0);
    expect(lifecycleLog()).toEqual(["start:lead:t-plug", "stop:t-plug:completed"]);
  });

  it("reports a run that fails after it started as failed (scenario G23)", async () => {
    const here = dirname(fileURLToPath(import.meta.url));
    const { lifecycleLog } = await import("../../fixtures/plugins/lifecycle-recorder.ts");
    const config = `plugins:\n  - use: ${here}/../../fixtures/plugins/lifecycle-recorder.ts:install\nextensions:\n  middlewares:\n    - ${here}/../../fixtures/extensions/failing-run.ts:createFailingRun\n`;
    const host = fakeHost(["run", "hi", "--thread", "t-fail", "--config", "/c/config.yaml"], { "/c/config.yaml": config });
    expect(await main(host)).toBe(1);
    expect(host.err.join("")).toContain("the operator's middleware broke");
    expect(lifecycleLog().filter((e) => e.includes("t-fail"))).toEqual(["start:lead:t-fail", "stop:t-fail:failed"]);
  });

  it("refuses to start when a required plugin fails, and starts without an optional one", async () => {
    const plugins = `${dirname(fileURLToPath(import.meta.url))}/../../fixtures/plugins/lifecycle-recorder.ts`;
    const required = fakeHost(["run", "hi", "--config", "/c/config.yaml"], { "/c/config.yaml": `plugins:\n  - use: ${plugins}:installBroken\n    required: true\n` });
    expect(await main(required)).toBe(1);
    expect(required.err.join("")).toContain("installBroken");
    const optional = fakeHost(["run", "hi", "--config", "/c/config.yaml"], { "/c/config.yaml": `plugins:\n  - use: ${plugins}:installBroken\n` });
    expect(await main(optional)).toBe(0);
    expect(optional.err.join("")).toMatch(/error: extension .*installBroken/);
  });

  it("--subagents binds the task tool for the run", async () => {
    const host = fakeHost(["run", "Write a note.", "--subagents"]);
    expect(await main(host)).toBe(0);
    expect(host.out.join("")).toContain(" · subagents on · ");
    const plain = fakeHost(["run", "Write a note."]);
    expect(await main(plain)).toBe(0);
    expect(plain.out.join("")).not.toContain("subagents on");
    const help = fakeHost(["help"]);
    await main(help);
    expect(help.out.join("")).toContain("--subagents");
  });

  it("explains usage mistakes with exit code 2", async () => {
    const noPrompt = fakeHost(["run"]);
    expect(await main(noPrompt)).toBe(2);
    expect(noPrompt.err.join("")).toContain("run needs a prompt");
    const badFlag = fakeHost(["run", "hi", "--modle", "x"]);
    expect(await main(badFlag)).toBe(2);
    expect(badFlag.err.join("")).toContain("Unknown option --modle");
    const help = fakeHost(["help"]);
    expect(await main(help)).toBe(0);
    expect(help.out.join("")).toContain("deerflow-edge run");
  });
});

describe("deerflow-edge with a replay model", () => {
  const session = readFileSync(new URL("../../fixtures/replay/write_read_file.ultra.json", import.meta.url), "utf8");
  const prompt = (JSON.parse(session) as { prompt: string }).prompt;
  const config = "models:\n  - name: scenario-model\n    use: replay\n    fixture: fixtures/session.json\n";

  it("reads the fixture beside the config and plays it, saying it is a replay", async () => {
    const host = fakeHost(["run", prompt, "--config", "conf/config.yaml"], { "conf/config.yaml": config, "conf/fixtures/session.json": session });
    expect(await main(host)).toBe(0);
    const text = host.out.join("");
    expect(host.err.join("")).toBe("");
    expect(text).toContain("model scenario-model (replay model: plays the recorded session replay:write_read_file, no provider is called)");
    expect(text).toMatch(/→ write_file\(path: \/mnt\/user-data\/outputs\/note\.txt\)/);
    expect(text).toMatch(/✓ read_file: hi from replay\./);
    expect(text.trimEnd().split("\n").some((line) => line.trim() === "hi from replay.")).toBe(true);
  });

  it("refuses to start on a bad fixture, naming the fixture file and the field", async () => {
    const broken = session.replace('"type": "ai"', '"type": "tool"');
    const host = fakeHost(["run", prompt, "--config", "conf/config.yaml"], { "conf/config.yaml": config, "conf/fixtures/session.json": broken });
    expect(await main(host)).toBe(1);
    expect(host.err.join("")).toMatch(/^error: conf\/fixtures\/session\.json: turns\[0\]\.output\.type: expected "ai"/);
    expect(host.out.join("")).toBe("");
    const missing = fakeHost(["serve", "--config", "conf/config.yaml"], { "conf/config.yaml": config });
    expect(await main(missing)).toBe(1);
    expect(missing.err.join("")).toContain("models[0].fixture: the replay fixture conf/fixtures/session.json does not exist");
  });
});
