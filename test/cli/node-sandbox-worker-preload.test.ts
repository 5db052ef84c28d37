// Node's sandbox workers under a process started with a TypeScript preload (`node --import x.ts`,
// as bench/soak.ts starts serve with its memory probe): a worker inheriting that flag failed
// before its entry ran ("Unknown file extension .ts"), and with it every bash call.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

describe("Node sandbox workers in a process with a TypeScript preload", () => {
  it("run commands: the worker does not inherit the process's --import flags", async () => {
    dir = mkdtempSync(join(tmpdir(), "deerflow-preload-"));
    const preload = join(dir, "preload.mts");
    writeFileSync(preload, "const marker: string = 'preloaded';\n(globalThis as Record<string, unknown>).__preload = marker;\n");
    const script = join(dir, "main.mts");
    writeFileSync(
      script,
      [
        `import { createNodeSandboxWorkers } from ${JSON.stringify(join(ROOT, "adapters/node/sandbox-worker.ts"))};`,
        `import { createVirtualSandboxProvider } from ${JSON.stringify(join(ROOT, "src/sandbox/virtual.ts"))};`,
        "const provider = createVirtualSandboxProvider({ workers: createNodeSandboxWorkers() });",
        "const sb = await provider.acquire({ userId: 'alice', threadId: 'thread-1' });",
        "const result = await sb.exec('echo from-worker', { timeoutMs: 60000 });",
        "console.log(JSON.stringify({ preload: (globalThis as Record<string, unknown>).__preload, result }));",
        "await provider.close();",
      ].join("\n"),
    );
    const child = spawn(process.execPath, ["--import", join(ROOT, "node_modules/tsx/dist/loader.mjs"), "--import", preload, script], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.once("close", resolve));
    expect(stderr).not.toMatch(/Unknown file extension/);
    if (code !== 0) throw new Error(stderr);
    expect(code).toBe(0);
    expect(JSON.parse(stdout.trim().split("\n").at(-1)!)).toEqual({ preload: "preloaded", result: { stdout: "from-worker\n", stderr: "", exitCode: 0 } });
  }, 120_000);
});
