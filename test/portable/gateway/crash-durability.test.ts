// Acknowledged means durable: the real CLI of the runtime this runs under (Node, Deno or Bun) is
// killed with SIGKILL right after it acknowledged uploads, and in the middle of a run; started
// again on the same storage, it still has the files (byte for byte) and the run's journal shows
// the run's start and its interruption by the restart. The same holds for what DeerFlow's UI
// writes through the gateway (a memory fact, a custom agent, run feedback, a thread goal, the MCP
// config): each acknowledged write is there after a SIGKILL and a restart.
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

describe(`SIGKILL right after the UI's writes are acknowledged (${runtime} CLI)`, () => {
  let workspace: CliWorkspace;
  beforeAll(async () => {
    workspace = await cliWorkspace({ models: [{ name: "demo", use: "demo" }], default_model: "demo" });
  });
  afterAll(async () => {
    await workspace?.dispose();
  });

  it("keeps a memory fact, a custom agent, run feedback, a goal and the MCP config", async () => {
    const server = await workspace.start();
    const send = async (method: string, path: string, body?: unknown) => {
      const response = await fetch(`${server.url}${path}`, {
        method,
        headers: { "content-type": "application/json" },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await response.text();
      expect(response.status, `${method} ${path}: ${text}\n${server.output()}`).toBeLessThan(300);
      return text === "" ? undefined : (JSON.parse(text) as Record<string, unknown>);
    };
    const { thread_id: threadId } = (await send("POST", "/api/threads", {})) as { thread_id: string };
    await send("POST", `/api/threads/${threadId}/runs/wait`, { assistant_id: "lead_agent", input: { messages: [{ type: "human", content: "Say hello." }] } });
    const [run] = (await (await fetch(`${server.url}/api/threads/${threadId}/runs?limit=1`)).json()) as Array<{ run_id: string }>;

    const fact = "Prefers metric units (kept across a crash)";
    await send("POST", "/api/memory/facts", { content: fact, category: "preference" });
    await send("POST", "/api/agents", { name: "crash-proof", description: "Survives a kill", model: "demo", tool_groups: ["file:read"], soul: "You outlive crashes." });
    await send("PUT", `/api/threads/${threadId}/runs/${run!.run_id}/feedback`, { rating: 1, comment: "kept" });
    await send("PUT", `/api/threads/${threadId}/goal`, { objective: "Write the crash report", max_continuations: 2 });
    await send("PUT", "/api/mcp/config", { mcp_servers: { docs: { enabled: false, type: "http", url: "http://127.0.0.1:9/mcp", description: "kept across a crash" } } });
    await server.kill();

    const restarted = await workspace.start();
    try {
      const read = async (path: string) => {
        const response = await fetch(`${restarted.url}${path}`);
        expect(response.status, `${path}\n${restarted.output()}`).toBe(200);
        return (await response.json()) as Record<string, unknown>;
      };
      const memory = (await read("/api/memory")) as { facts: Array<{ content: string }> };
      expect(memory.facts.map((f) => f.content)).toContain(fact);
      expect(await read("/api/agents/crash-proof")).toMatchObject({ name: "crash-proof", soul: "You outlive crashes." });
      expect(await read(`/api/threads/${threadId}/runs/${run!.run_id}/feedback`)).toEqual([expect.objectContaining({ rating: 1, comment: "kept" })]);
      expect(JSON.stringify(await read(`/api/threads/${threadId}/goal`))).toContain("Write the crash report");
      const mcp = (await read("/api/mcp/config")) as { mcp_servers: Record<string, { description?: string }> };
      expect(mcp.mcp_servers.docs?.description).toBe("kept across a crash");
    } finally {
      await restarted.kill();
    }
  }, 120_000);
});
