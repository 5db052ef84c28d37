// What a user of the published package does: `npm pack` (prepack builds dist/), install the
// tarball into fresh projects, and use it from plain JavaScript on node, deno and bun, from the
// bin, and from TypeScript with `tsc --init`'s strict defaults. Needs the npm registry (or the
// local npm cache, --prefer-offline) for the tarball's dependencies; bounded to a few minutes.
import { execFile, spawn } from "node:child_process";
import { cp, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const repo = fileURLToPath(new URL("../..", import.meta.url));
const bin = (name: string) => join(repo, "node_modules", ".bin", name);
const here = (name: string) => fileURLToPath(new URL(name, import.meta.url));
const MINUTE = 60_000;

interface ConsumerReport {
  runtime: string;
  answer: { status: string; text: string };
  stream: { events: string[]; last: string };
  wrongRuntime: string;
}

let root = "";
let packed: { filename: string; files: { path: string }[] };
let npmProject = "";
let bunProject = "";

async function freshProject(name: string): Promise<string> {
  const dir = join(root, name);
  await cp(here("consumer.mjs"), join(dir, "consumer.mjs"));
  await cp(here("consumer.ts"), join(dir, "consumer.ts"));
  await writeFile(join(dir, "package.json"), JSON.stringify({ name, private: true, type: "module" }));
  return dir;
}

async function consumer(cwd: string, command: string, args: string[]): Promise<ConsumerReport> {
  const { stdout } = await run(command, [...args, "consumer.mjs"], { cwd, timeout: MINUTE, maxBuffer: 16 << 20 });
  return JSON.parse(stdout.trim().split("\n").at(-1)!) as ConsumerReport;
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "deerflow-pack-"));
  const { stdout } = await run("npm", ["pack", "--json", "--pack-destination", root], { cwd: repo, timeout: 2 * MINUTE, maxBuffer: 16 << 20 });
  packed = (JSON.parse(stdout.slice(stdout.indexOf("["))) as (typeof packed)[])[0]!;
  const tarball = join(root, packed.filename);
  npmProject = await freshProject("consumer-npm");
  bunProject = await freshProject("consumer-bun");
  await Promise.all([
    run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", tarball], { cwd: npmProject, timeout: 3 * MINUTE }),
    run(bin("bun"), ["add", tarball], { cwd: bunProject, timeout: 2 * MINUTE }),
  ]);
}, 5 * MINUTE);

afterAll(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

function expectDemoTurns(report: ConsumerReport, runtime: string, rightEntry: string) {
  expect(report.runtime).toBe(runtime);
  expect(report.answer.status).toBe("success");
  expect(report.answer.text).toContain("Summarize the water cycle");
  expect(report.stream.events[0]).toBe("metadata");
  expect(report.stream.events.at(-1)).toBe("end");
  expect(report.stream.events).toContain("values");
  expect(report.stream.last).toContain("Describe the moon");
  // The consumer imports an adapter of another runtime last: one sentence naming the right entry.
  expect(report.wrongRuntime).toMatch(new RegExp(`^wrong_runtime: deerflow-edge/\\w+ runs on \\w+, but this is \\w+: import ${rightEntry} instead\\.$`));
}

/** The demo's second step ran bash in the virtual sandbox (its worker started from the build) and printed wc's output. */
function expectSandboxRan(stdout: string) {
  expect(stdout).not.toContain("Sandbox unavailable");
  expect(stdout).toMatch(/The output was:\s+```\s+\d+ \/mnt\/user-data\/workspace\/notes\.md/);
}

describe("the packed tarball", () => {
  it("holds the build, the bin, README and LICENSE; no sources, tests, benches or fixtures", () => {
    const paths = packed.files.map((file) => file.path);
    expect(paths).toContain("dist/src/index.js");
    expect(paths).toContain("dist/src/index.d.ts");
    expect(paths).toContain("dist/adapters/node/cli.js");
    expect(paths).toContain("dist/bin/deerflow-edge.mjs");
    expect(paths).toContain("dist/bin/sandbox-worker-entry.js");
    expect(paths).toContain("dist/adapters/node/sandbox-worker-entry.js");
    expect(paths).toContain("bin/deerflow-edge.mjs");
    expect(paths.filter((path) => /^(src|adapters|test|bench|examples|scripts)\//.test(path) || /fixtures|\.test\.|\.ts$/.test(path.replace(/\.d\.ts$/, ""))), "unexpected files").toEqual([]);
  });
});

describe("the installed package", () => {
  it("runs a demo turn through createDeerFlowClient and a streamed run through createGateway on plain node", async () => {
    expectDemoTurns(await consumer(npmProject, process.execPath, []), "node", "deerflow-edge/node");
  }, 2 * MINUTE);

  it("does the same on Deno from the installed node_modules, without -A", async () => {
    // Deno Deploy's permissions: no --allow-sys, --allow-write or --allow-run.
    const flags = ["run", "--allow-read", "--allow-env", "--allow-net", "--unstable-no-legacy-abort"];
    expectDemoTurns(await consumer(npmProject, bin("deno"), flags), "deno", "deerflow-edge/deno");
  }, 2 * MINUTE);

  it("does the same on Bun, installed with bun add", async () => {
    expectDemoTurns(await consumer(bunProject, bin("bun"), []), "bun", "deerflow-edge/bun");
  }, 2 * MINUTE);

  it("runs the bin on plain node from the one-file build (demo, and serve answering /api/ok), loading a TypeScript module through tsx only when asked", async () => {
    const binPath = join(npmProject, "node_modules", ".bin", "deerflow-edge");
    const demo = await run(binPath, ["demo"], { cwd: npmProject, timeout: MINUTE });
    expect(demo.stdout).toContain("built-in demo model");
    expectSandboxRan(demo.stdout);
    await writeFile(join(npmProject, "config.yaml"), "storage:\n  driver: memory\n");
    const serve = spawn(binPath, ["serve", "--config", "config.yaml", "--host", "127.0.0.1", "--port", "0"], { cwd: npmProject, stdio: ["ignore", "pipe", "pipe"] });
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = "";
        serve.stdout!.on("data", (chunk) => {
          out += String(chunk);
          const found = /deerflow-edge gateway · (http:\/\/127\.0\.0\.1:\d+)/.exec(out)?.[1];
          if (found) resolve(found);
        });
        serve.once("exit", (code) => reject(new Error(`serve exited (${code}) before listening: ${out}`)));
      });
      const ok = await fetch(`${url}/api/ok`);
      expect(ok.status).toBe(200);
      expect(await ok.json()).toEqual({ ok: true });
    } finally {
      serve.kill("SIGTERM");
    }
    for (const file of [["adapters", "node", "cli.js"], ["bin", "deerflow-edge.mjs"]]) {
      const code = await readFile(join(npmProject, "node_modules", "deerflow-edge", "dist", ...file), "utf8");
      expect(code, file.join("/")).not.toMatch(/from\s*"\.{1,2}\/[^"]+\.ts"/);
    }
    // A user's extension written in TypeScript still loads on Node 20, which cannot strip types.
    await writeFile(join(npmProject, "typed.ts"), "export const answer: number = 42;\n");
    const loaded = await run(process.execPath, ["--input-type=module", "-e",
      'const { createModuleLoader } = await import("deerflow-edge/node"); console.log((await createModuleLoader().load("./typed.ts")).answer);'], { cwd: npmProject, timeout: MINUTE });
    expect(loaded.stdout.trim()).toBe("42");
    // And through the bundled CLI: a configured extension middleware written in TypeScript runs in the turn.
    await writeFile(join(npmProject, "audit.ts"), [
      "interface Seen { messages: unknown[] }",
      "export function AuditMiddleware(): { name: string; beforeModel: (state: Seen) => undefined } {",
      "  return { name: \"Audit\", beforeModel: (state: Seen) => { console.error(`audit: ${state.messages.length} messages`); return undefined; } };",
      "}",
    ].join("\n"));
    await writeFile(join(npmProject, "audit.yaml"), 'storage:\n  driver: memory\nextensions:\n  middlewares: ["./audit.ts:AuditMiddleware"]\n');
    const audited = await run(binPath, ["run", "Write a note", "--config", "audit.yaml"], { cwd: npmProject, timeout: MINUTE });
    expect(audited.stderr).toContain("audit: 2 messages");
    expect(audited.stdout).toContain("done");
  }, 2 * MINUTE);

  it("runs the built CLI of Deno (Deploy's permissions) and of Bun: the demo's bash call runs in the sandbox's worker", async () => {
    const cli = (runtime: string) => join(npmProject, "node_modules", "deerflow-edge", "dist", "adapters", runtime, "cli.js");
    const deno = await run(bin("deno"), ["run", "--allow-read", "--allow-env", "--allow-net", "--unstable-no-legacy-abort", cli("deno"), "demo"], { cwd: npmProject, timeout: MINUTE });
    expectSandboxRan(deno.stdout);
    const bun = await run(bin("bun"), [cli("bun"), "demo"], { cwd: bunProject, timeout: MINUTE });
    expectSandboxRan(bun.stdout);
  }, 2 * MINUTE);

  it("type-checks a TypeScript consumer under tsc --init's strict defaults (nodenext), and under bundler resolution", async () => {
    await run(bin("tsc"), ["--init"], { cwd: npmProject, timeout: MINUTE });
    await run(bin("tsc"), ["-p", ".", "--noEmit"], { cwd: npmProject, timeout: MINUTE });
    await run(bin("tsc"), ["-p", ".", "--noEmit", "--module", "preserve", "--moduleResolution", "bundler"], { cwd: npmProject, timeout: MINUTE });
    // And the check has teeth: a wrong type through the package's declarations is an error.
    await writeFile(join(npmProject, "wrong.ts"), 'import { Placement } from "deerflow-edge/extension-api";\nexport const wrong: number = Placement.MODEL_LOGICAL;\n');
    const failed = await run(bin("tsc"), ["-p", ".", "--noEmit"], { cwd: npmProject, timeout: MINUTE }).then(() => "", (error: { stdout: string }) => error.stdout);
    expect(failed).toContain("wrong.ts");
    expect(failed).toContain("TS2322");
    await rm(join(npmProject, "wrong.ts"));
  }, 2 * MINUTE);
});
