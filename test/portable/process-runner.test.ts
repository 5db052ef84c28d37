import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBunProcessRunner } from "../../adapters/bun/process-runner.ts";
import { createDenoProcessRunner } from "../../adapters/deno/process-runner.ts";
import { createNodeProcessRunner } from "../../adapters/node/process-runner.ts";
import { ProcessRunnerError } from "../../adapters/shared/process-runner-error.ts";
import type { ProcessRunner } from "../../src/ports/runtime-ports.ts";

const g = globalThis as { Deno?: unknown; Bun?: unknown };
const runtime = g.Deno ? "deno" : g.Bun ? "bun" : "node";
const runner: ProcessRunner =
  runtime === "deno" ? createDenoProcessRunner() : runtime === "bun" ? createBunProcessRunner() : createNodeProcessRunner();

describe(`ProcessRunner (${runtime})`, () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "deerflow-run-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("runs a program with args in cwd and collects stdout, stderr and the exit code", async () => {
    const r = await runner.run("bash", ["-c", 'pwd; echo "$1" >&2; exit 7', "_", "arg ✓"], { cwd: dir });
    expect(r.stdout.trim().endsWith(dir.split("/").pop()!)).toBe(true);
    expect(r.stderr).toBe("arg ✓\n");
    expect(r.exitCode).toBe(7);
    expect(r.timedOut).toBe(false);
  });

  it("uses env as the whole environment when given", async () => {
    const hostEnv = (globalThis as { process?: { env: Record<string, string | undefined> } }).process!.env;
    hostEnv.DEERFLOW_EDGE_RUNNER_SECRET = "leak";
    try {
      const r = await runner.run("/bin/bash", ["-c", "echo ${DEERFLOW_EDGE_RUNNER_SECRET:-none} $ONLY"], {
        cwd: dir,
        env: { ONLY: "given", PATH: "/usr/bin:/bin" },
      });
      expect(r.stdout).toBe("none given\n");
    } finally {
      delete hostEnv.DEERFLOW_EDGE_RUNNER_SECRET;
    }
  });

  it("kills the whole process group on timeout and reports it", async () => {
    const r = await runner.run("bash", ["-c", "echo started; sleep 10; echo finished"], { cwd: dir, timeoutMs: 300 });
    expect(r.timedOut).toBe(true);
    expect(r.stdout).toBe("started\n");
    expect(r.exitCode).not.toBe(0);
  });

  it("leaves no grandchild running after a timeout", async () => {
    const r = await runner.run("bash", ["-c", "sleep 30 & echo $!; wait"], { cwd: dir, timeoutMs: 300 });
    expect(r.timedOut).toBe(true);
    const pid = Number(r.stdout.trim());
    expect(pid).toBeGreaterThan(0);
    // Gone, or a zombie waiting for init to reap it; /proc is Linux-only, elsewhere ask kill -0.
    const probe = `s=$(cut -d' ' -f3 /proc/${pid}/stat 2>/dev/null); ` +
      `if [ -d /proc/self ]; then [ -z "$s" ] || [ "$s" = Z ] && echo gone || echo alive; ` +
      `else kill -0 ${pid} 2>/dev/null && echo alive || echo gone; fi`;
    let state = "";
    for (let i = 0; i < 20 && state !== "gone"; i++) {
      state = (await runner.run("bash", ["-c", probe], { cwd: dir })).stdout.trim();
      if (state !== "gone") await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(state).toBe("gone");
  });

  it("rejects with the signal's reason on abort", async () => {
    const controller = new AbortController();
    const reason = new Error("stop now");
    setTimeout(() => controller.abort(reason), 100);
    await expect(runner.run("bash", ["-c", "sleep 10"], { cwd: dir, signal: controller.signal })).rejects.toBe(reason);
    await expect(runner.run("bash", ["-c", "echo never"], { cwd: dir, signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
  });

  it("reports a missing program or directory as process_spawn_failed", async () => {
    for (const [command, cwd] of [["no-such-program-xyz", dir], ["bash", join(dir, "missing")]] as const) {
      const error = await runner.run(command, [], { cwd }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ProcessRunnerError);
      expect((error as ProcessRunnerError).code).toBe("process_spawn_failed");
      expect((error as Error).message).toContain(command);
    }
  });
});
