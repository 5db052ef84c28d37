// What scripts/build-worker.mjs leaves out of the Cloudflare Workers build, checked on workerd: a
// probe Worker (test/fixtures/worker-trims/probe-worker.ts) built with the same trims runs the
// checkpoint serializer over what this project's checkpoints hold (every message type, documents)
// and revives it intact, while a class of a namespace the trimmed import map leaves out fails
// naming the trim; and just-bash's trimmed commands answer exit 127 with the trim's reason, the
// commands agents use running as before.
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  KEPT_TRANSLATORS,
  REVIVABLE_NAMESPACES,
  TRIM_MARKER,
  TRIMMED_COMMANDS,
  trimmedBlockTranslators,
  trimmedImportMap,
  trimmedJustBash,
  trimmedMcpAuth,
} from "../../../scripts/build-worker.mjs";
import { buildWorkerModules, startWorkerd, type Workerd } from "./workerd-harness.ts";

const MINUTE = 60_000;
const PROBE = fileURLToPath(new URL("../../fixtures/worker-trims/probe-worker.ts", import.meta.url));

let dir = "";
let workerd: Workerd<"probe"> | undefined;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "deerflow-worker-trims-"));
  const modules = await buildWorkerModules(join(dir, "probe"), PROBE);
  workerd = await startWorkerd(dir, "probe", modules, { probe: {} });
}, 5 * MINUTE);

afterAll(async () => {
  await workerd?.kill();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function probe(path: string, params: Record<string, string> = {}): Promise<Record<string, unknown>> {
  const response = await fetch(`${workerd!.urls.probe}${path}?${new URLSearchParams(params)}`);
  const body = (await response.json()) as Record<string, unknown>;
  expect(response.status, `${JSON.stringify(body)}\n${workerd!.output()}`).toBe(200);
  return body;
}

const bash = (command: string, network = false) =>
  probe("/bash", { command, ...(network ? { network: "1" } : {}) }) as Promise<{ stdout: string; stderr: string; exitCode: number }>;

describe("the Workers build's trimmed checkpoint import map", () => {
  it("round-trips a checkpoint's messages (system, human, ai with tool_calls, tool, ai chunk) and documents", async () => {
    expect(await probe("/round-trip")).toEqual({
      classes: ["SystemMessage", "HumanMessage", "AIMessage", "ToolMessage", "AIMessageChunk"],
      types: ["system", "human", "ai", "tool", "ai"],
      contents: ["You are terse.", "Write a note.", "", "42", "Done."],
      toolCalls: [{ id: "call_1", name: "bash", args: { command: "echo 42" }, type: "tool_call" }],
      toolCallId: "call_1",
      ids: ["m0", "m1", "m2", "m3", "m4"],
      document: { pageContent: "a note", metadata: { path: "notes.md" } },
      tags: ["a"],
    });
  });

  it("revives each namespace it keeps", async () => {
    expect(REVIVABLE_NAMESPACES).toEqual(expect.arrayContaining(["messages", "documents"]));
    expect(await probe("/revive", { id: JSON.stringify(["langchain_core", "messages", "HumanMessage"]) })).toEqual({ revived: "HumanMessage" });
    expect(await probe("/revive", { id: JSON.stringify(["langchain_core", "messages", "tool", "ToolMessage"]) })).toEqual({ revived: "ToolMessage" });
  });

  it("refuses a class of a namespace it leaves out, naming the trim (and prints it, so the workerd test would see a run reach it)", async () => {
    const before = workerd!.output();
    const { error } = await probe("/revive", { id: JSON.stringify(["langchain_core", "prompts", "chat", "ChatPromptTemplate"]) });
    expect(error).toContain(TRIM_MARKER);
    expect(error).toContain("langchain_core/prompts");
    await expect.poll(() => workerd!.output().slice(before.length)).toContain(TRIM_MARKER);
    // A namespace no version of the map knows keeps load()'s own error.
    expect((await probe("/revive", { id: JSON.stringify(["langchain_core", "no_such_module", "Thing"]) })).error).toContain("Invalid namespace");
  });
});

describe("the Workers build's other library stubs", () => {
  it("answer as the runtime would (zod's compile keeps the runtime parser, token counts are approximate) or fail naming the trim", async () => {
    const results = (await probe("/stubs")) as Record<string, { value?: unknown; error?: string }>;
    expect(results.zodCompile).toEqual({ value: true });
    expect(results.getNumTokens).toEqual({ value: 2 });
    for (const name of ["zodCompileStrict", "zodFromJSONSchema", "xmlParser", "drawMermaid", "mcpAuth", "responseCache"]) {
      expect(results[name]!.error, `${name}: ${JSON.stringify(results[name])}`).toContain(TRIM_MARKER);
    }
    // getNumTokens warned why it counted approximately.
    await expect.poll(() => workerd!.output()).toContain("tiktoken token counting is not part of the Cloudflare Workers build");
  });
});

describe("the Workers build's content-block translators", () => {
  it("keeps OpenAI's, and reads a left-out provider's message by the generic path, printing the trim once", async () => {
    expect(KEPT_TRANSLATORS).toEqual(["openai"]);
    const expected = { blocks: [{ type: "text", text: "hi" }], text: "hi", again: "hi" };
    const before = workerd!.output();
    expect(await probe("/content-blocks", { provider: "openai" })).toEqual(expected);
    expect(await probe("/content-blocks", { provider: "" })).toEqual(expected);
    expect(workerd!.output().slice(before.length)).not.toContain(TRIM_MARKER);
    expect(await probe("/content-blocks", { provider: "anthropic" })).toEqual(expected);
    const reason = "the anthropic content-block translator is not part of the Cloudflare Workers build";
    await expect.poll(() => workerd!.output().slice(before.length)).toContain(reason);
    // Three reads of it (.contentBlocks, .text twice), one report.
    expect(workerd!.output().slice(before.length).split(reason).length - 1).toBe(1);
  });
});

describe("the Workers build's trimmed just-bash", () => {
  it("answers each trimmed command with exit 127 and the trim's reason", async () => {
    expect(Object.keys(TRIMMED_COMMANDS)).toEqual(["file", "html-to-markdown", "curl"]);
    for (const [command, network] of [["file /etc", false], ["echo '<p>hi</p>' | html-to-markdown", false], ["curl -s https://example.com/", true]] as const) {
      const result = await bash(command, network);
      const name = command.includes("|") ? "html-to-markdown" : command.split(" ")[0]!;
      expect(result.exitCode, JSON.stringify(result)).toBe(127);
      expect(result.stderr).toContain(`${name}: ${TRIM_MARKER}: the ${name} command is not part of the Cloudflare Workers build`);
      expect(result.stdout).toBe("");
    }
  });

  it("still runs the commands agents use (grep, sed, awk, jq, find, sort, rg, printf, diff)", async () => {
    const script = [
      "mkdir -p /w && cd /w",
      "printf 'b 2\\na 1\\n' > t.txt",
      `echo '{"n":[1,2,3]}' > j.json`,
      "grep -c ' ' t.txt",
      "sed 's/b/B/' t.txt | sort",
      "awk '{ s += $2 } END { print s }' t.txt",
      "jq '.n | add' j.json",
      "find . -name '*.json'",
      "rg -l '1' .",
      "diff <(echo x) <(echo y) > /dev/null; echo diff=$?",
    ].join("\n");
    const result = await bash(script);
    expect(result.stderr).toBe("");
    expect(result.stdout).toBe("2\na 1\nB 2\n3\n6\n./j.json\nj.json\nt.txt\ndiff=1\n");
  });
});

// A dependency upgrade that changes what a trim reads must stop the build, not ship the bundle
// untrimmed or broken.
describe("the trims refuse a dependency whose shape changed", () => {
  const moduleFile = (file: string) => fileURLToPath(new URL(`../../../node_modules/${file}`, import.meta.url));

  it("just-bash: its lazy-init helper or a command entry no longer found", async () => {
    const path = moduleFile("just-bash/dist/bundle/browser.js");
    const source = await readFile(path, "utf8");
    expect(trimmedJustBash(source, path)).toContain("/* @__PURE__ */");
    const helper = /var ([A-Za-z_$][\w$]*)=\(e,t\)=>\(\)=>\(e&&\(t=e\(e=0\)\),t\)/.exec(source)![1]!;
    expect(() => trimmedJustBash(source.replace(`var ${helper}=(e,t)=>`, `var ${helper}=(a,t)=>`), path)).toThrow(TRIM_MARKER);
    expect(() => trimmedJustBash(source.replace('{name:"file",load:async()=>', '{name:"file",load:()=>'), path)).toThrow("no command entry for file");
  });

  it("@langchain/core's import map and block translators, the MCP SDK's client/auth.js: a key or helper no longer found", async () => {
    const translatorsPath = moduleFile("@langchain/core/dist/messages/block_translators/index.js");
    expect(await trimmedBlockTranslators(translatorsPath)).toContain('["openai", ChatOpenAITranslator]');
    const translators = join(dir, "translators.js");
    await writeFile(translators, (await readFile(translatorsPath, "utf8")).replace('["openai", ChatOpenAITranslator]', '["openai-responses", ChatOpenAITranslator]'));
    await expect(trimmedBlockTranslators(translators)).rejects.toThrow(TRIM_MARKER);
    const mapPath = moduleFile("@langchain/core/dist/load/import_map.js");
    const authPath = moduleFile("@modelcontextprotocol/sdk/dist/esm/client/auth.js");
    expect(await trimmedImportMap(mapPath)).toContain("messages_exports");
    expect(await trimmedMcpAuth(authPath)).toContain("export function extractWWWAuthenticateParams(res) {");
    const changed = join(dir, "changed.js");
    await writeFile(changed, (await readFile(mapPath, "utf8")).replace("\tmessages: () =>", "\tmessages_v2: () =>"));
    await expect(trimmedImportMap(changed)).rejects.toThrow(TRIM_MARKER);
    await writeFile(changed, (await readFile(authPath, "utf8")).replace("export function extractWWWAuthenticateParams(res)", "export function extractWWWAuthenticateParams(response)"));
    await expect(trimmedMcpAuth(changed)).rejects.toThrow(TRIM_MARKER);
  });
});
