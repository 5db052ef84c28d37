// Acknowledged means durable: the real CLI of the runtime this runs under (Node, Deno or Bun) is
// killed with SIGKILL right after it acknowledged uploads, and in the middle of a run; started
// again on the same storage, it still has the files (byte for byte) and the run's journal shows
// the run's start and its interruption by the restart.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cliWorkspace, currentRuntime, type CliWorkspace } from "./cli-server.ts";

async function sha256(bytes: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** An OpenAI-compatible endpoint that takes the request and never answers: a run stays running. */
async function silentModel(): Promise<{ server: Server; url: string; requests: () => number }> {
  let requests = 0;
  const server = createServer((request) => {
    requests++;
    request.resume();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, requests: () => requests };
}

async function waitFor(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}.`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

const runtime = currentRuntime();

describe(`SIGKILL right after the acknowledgement (${runtime} CLI)`, () => {
  let workspace: CliWorkspace;
  let model: Awaited<ReturnType<typeof silentModel>>;

  beforeAll(async () => {
    model = await silentModel();
    workspace = await cliWorkspace(
      {
        models: [{ name: "silent", use: "openai-compatible", model: "silent-1", base_url: model.url, api_key_env: "SILENT_MODEL_KEY" }],
        default_model: "silent",
      },
      { SILENT_MODEL_KEY: "test-key" },
    );
  });
  afterAll(async () => {
    await workspace?.dispose();
    model?.server.closeAllConnections();
    await new Promise((resolve) => model?.server.close(resolve));
  });

  it("keeps an acknowledged upload byte for byte, and journals the run it killed mid-run: its start and its interruption by the restart", async () => {
    const server = await workspace.start();
    const created = (await (await fetch(`${server.url}/api/threads`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).json()) as { thread_id: string };
    const threadId = created.thread_id;
    const before = model.requests();
    const started = await fetch(`${server.url}/api/threads/${threadId}/runs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ assistant_id: "lead_agent", input: { messages: [{ type: "human", content: "Say hello." }] } }),
    });
    expect(started.status, server.output()).toBe(200);
    const { run_id: runId } = (await started.json()) as { run_id: string };
    // The model has the request and will never answer: the run is in the middle of its work.
    await waitFor(() => model.requests() > before, "the run to call the model");

    const big = new Uint8Array(1_500_000);
    for (let offset = 0; offset < big.length; offset += 65_536) crypto.getRandomValues(big.subarray(offset, offset + 65_536));
    const files = new Map<string, Uint8Array>([
      ["big.bin", big],
      ["notes.txt", new TextEncoder().encode("acknowledged means durable\n")],
      ["empty.dat", new Uint8Array(0)],
    ]);
    const form = new FormData();
    for (const [name, bytes] of files) form.append("files", new File([bytes as Uint8Array<ArrayBuffer>], name));
    const uploaded = await fetch(`${server.url}/api/threads/${threadId}/uploads`, { method: "POST", body: form });
    expect(uploaded.status, server.output()).toBe(200);
    await uploaded.arrayBuffer();
    await server.kill();

    const restarted = await workspace.start();
    try {
      const list = (await (await fetch(`${restarted.url}/api/threads/${threadId}/uploads/list`)).json()) as { files: Array<{ filename: string; size: number }> };
      expect(list.files.map((f) => [f.filename, f.size]).sort()).toEqual([...files].map(([name, bytes]) => [name, bytes.length]).sort());
      for (const [name, bytes] of files) {
        const served = await fetch(`${restarted.url}/api/threads/${threadId}/artifacts/mnt/user-data/uploads/${name}`);
        expect(served.status, name).toBe(200);
        expect(await sha256(new Uint8Array(await served.arrayBuffer())), name).toBe(await sha256(bytes));
      }

      const run = (await (await fetch(`${restarted.url}/api/threads/${threadId}/runs/${runId}`)).json()) as { status: string };
      expect(run.status).toBe("interrupted");
      const journal = (await (await fetch(`${restarted.url}/api/threads/${threadId}/runs/${runId}/events`)).json()) as Array<{
        kind: string;
        data: { status?: string; reason?: string };
      }>;
      const statuses = journal.filter((e) => e.kind === "status");
      expect(statuses.map((e) => e.data.status)).toEqual(["pending", "running", "interrupted"]);
      expect(statuses.at(-1)!.data.reason).toMatch(/interrupted by a restart/i);
    } finally {
      await restarted.kill();
    }
    // Two cold starts of the CLI (TypeScript compiled on the fly) on a shared machine.
  }, 120_000);
});
