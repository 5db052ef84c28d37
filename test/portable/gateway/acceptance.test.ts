import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { createFsKeyValue } from "../../../adapters/shared/fs-key-value.ts";
import { createModuleLoader } from "../../../adapters/shared/module-loader.ts";
import type { ModuleLoader } from "../../../src/ports/module-loader.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { resetGatewayProbe } from "../../fixtures/plugins/gateway-acceptance.ts";
import { acceptanceGateway, acceptanceGateways, call, human, plugin, pluginUse, send } from "../../fixtures/plugins/gateway-harness.ts";

/*
 * The gateway as `deerflow-edge serve` starts it on the runtime running the test: plugins resolved by the runtime's module
 * loader relative to the config's folder, fs storage where a restart must lose nothing.
 */

const pluginsDir = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "fixtures", "plugins");

/** The adapters' loader over the fixtures folder, recording every module it actually imports. */
function recordingLoader(): { loader: ModuleLoader; imported: string[] } {
  const imported: string[] = [];
  const loader = createModuleLoader({
    baseDir: pluginsDir,
    importModule: (target) => {
      imported.push(target);
      return import(/* @vite-ignore */ target);
    },
  });
  return { loader, imported };
}

const dirs: string[] = [];
const gatewayWith = acceptanceGateways(() => ({ loader: recordingLoader().loader }));
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

describe("plugins at gateway start", () => {
  it("scenario G1: [A, B(enabled:false, required:true, use:missing.mod:install)] → A installs, B is never imported, the gateway starts", async () => {
    const probe = resetGatewayProbe();
    const { loader, imported } = recordingLoader();
    const built = await gatewayWith(
      { plugins: [plugin("installService", { name: "A" }), { use: "missing.mod:install", enabled: false, required: true }] },
      { loader },
    );
    expect(built.loaded.loaded).toEqual([pluginUse("installService")]);
    expect(imported).toHaveLength(1);
    expect(imported[0]).toMatch(/gateway-acceptance\.ts$/);
    expect(probe.log).toEqual(["start:A"]);
    expect(built.loaded.diagnostics).toEqual([]);
    expect((await call(built.gateway, "GET", "/api/ok")).status).toBe(200);
  });

  it("scenario G2: an optional plugin whose use does not resolve → the gateway serves, one error diagnostic with source = that use, later plugins load", async () => {
    const probe = resetGatewayProbe();
    const missing = "./no-such-plugin.ts:install";
    const built = await gatewayWith({
      plugins: [plugin("installService", { name: "before" }), { use: missing }, plugin("installRouter", { variant: "valid" }), plugin("installService", { name: "after" })],
    });
    const errors = [...built.loaded.diagnostics, ...built.gateway.diagnostics].filter((d) => d.level === "error");
    expect(errors).toEqual([expect.objectContaining({ level: "error", source: missing, message: expect.stringContaining("could not resolve") })]);
    expect(built.loaded.loaded).toEqual([pluginUse("installService"), pluginUse("installRouter"), pluginUse("installService")]);
    expect(probe.log).toEqual(["start:before", "start:after"]);
    expect(await call(built.gateway, "GET", "/api/ext/valid")).toMatchObject({ status: 200, body: { valid: "default" } });
    await call(built.gateway, "POST", "/api/threads", { body: { thread_id: "t2" } });
    const run = await call(built.gateway, "POST", "/api/threads/t2/runs/wait", { body: { input: human("Write a note about plugins.") } });
    expect(run.status).toBe(200);
    expect(run.body.messages.at(-1).type).toBe("ai");
  });
});

describe("shutdown with a run in flight", () => {
  it("scenario G31: the run is interrupted and persisted before any service stop runs, and every stop completes before storage closes", async () => {
    const probe = resetGatewayProbe();
    const storage = createMemoryKeyValue();
    const order: string[] = [];
    const dispose = storage.dispose.bind(storage);
    storage.dispose = async () => {
      order.push("storage:dispose");
      await dispose();
    };
    const built = await gatewayWith(
      { plugins: [plugin("installService", { name: "S1" }), plugin("installService", { name: "S2" }), plugin("installProbe")] },
      { storage },
    );
    const { gateway } = built;
    await call(gateway, "POST", "/api/threads", { body: { thread_id: "t31" } });
    let held!: () => void;
    const inFlight = new Promise<void>((resolve) => (held = resolve));
    probe.hold = new Promise<void>(() => {});
    probe.onHeld = held;
    const created = await call(gateway, "POST", "/api/threads/t31/runs", { body: { input: human("Write a note about shutdowns.") } });
    expect(created.status).toBe(200);
    const runId = created.body.run_id as string;
    await inFlight;
    expect((await call(gateway, "GET", `/api/threads/t31/runs/${runId}`)).body.status).toBe("running");

    // What each service's stop sees of the world, read through the gateway's own routes.
    const seenAtStop: Array<{ service: string; status: string; messages: string[] }> = [];
    probe.onServiceStop = async (service) => {
      order.push(`stop:${service}`);
      const run = await call(gateway, "GET", `/api/threads/t31/runs/${runId}`);
      const state = await call(gateway, "GET", "/api/threads/t31/state");
      seenAtStop.push({ service, status: run.body.status, messages: state.body.values.messages.map((m: { content: unknown }) => JSON.stringify(m.content)) });
      order.push(`stopped:${service}`);
    };
    await gateway.shutdown();

    expect(order).toEqual(["stop:S2", "stopped:S2", "stop:S1", "stopped:S1", "storage:dispose"]);
    expect(seenAtStop.map((s) => [s.service, s.status])).toEqual([
      ["S2", "interrupted"],
      ["S1", "interrupted"],
    ]);
    // The run's input checkpoint was saved: the thread's state holds the question it was answering.
    expect(seenAtStop[0]!.messages.some((m) => m.includes("Write a note about shutdowns."))).toBe(true);
  });
});

describe("restart over fs storage", () => {
  it("a new gateway over the same folder lists the thread, its state, its finished run (success) and its uploaded file", async () => {
    const dir = await mkdtemp(join(tmpdir(), "deerflow-acceptance-"));
    dirs.push(dir);
    const first = await acceptanceGateway({}, { storage: createFsKeyValue(dir) });
    await call(first.gateway, "POST", "/api/threads", { body: { thread_id: "kept", metadata: { topic: "restart" } } });
    const run = await call(first.gateway, "POST", "/api/threads/kept/runs/wait", { body: { input: human("Write a note about restarts.") } });
    expect(run.status).toBe(200);
    // Uploaded after the run, so only the gateway's own shutdown can have saved it.
    const form = new FormData();
    form.append("files", new File(["a,b\n1,2\n"], "data.csv", { type: "text/csv" }));
    expect((await send(first.gateway, "POST", "/api/threads/kept/uploads", { form })).status).toBe(200);
    const [finished] = (await call(first.gateway, "GET", "/api/threads/kept/runs")).body;
    expect(finished.status).toBe("success");
    const before = (await call(first.gateway, "GET", "/api/threads/kept/state")).body.values;
    await first.gateway.shutdown();

    const second = await gatewayWith({}, { storage: createFsKeyValue(dir) });
    const { gateway } = second;
    const listed = (await call(gateway, "POST", "/api/threads/search", { body: {} })).body;
    expect(listed).toEqual([expect.objectContaining({ thread_id: "kept", metadata: expect.objectContaining({ topic: "restart" }), status: "idle" })]);
    const state = (await call(gateway, "GET", "/api/threads/kept/state")).body.values;
    expect(state.messages).toEqual(before.messages);
    expect(state.title).toBe(before.title);
    const runs = (await call(gateway, "GET", "/api/threads/kept/runs")).body;
    expect(runs).toEqual([expect.objectContaining({ run_id: finished.run_id, status: "success" })]);
    expect((await call(gateway, "GET", `/api/threads/kept/runs/${finished.run_id}`)).body.status).toBe("success");
    // The run journal came back too: its status changes and the custom events of the run.
    const journal = (await call(gateway, "GET", `/api/threads/kept/runs/${finished.run_id}/events`)).body as Array<{ kind: string; data: { status?: string } }>;
    expect(journal.filter((e) => e.kind === "status").map((e) => e.data.status)).toEqual(["pending", "running", "success"]);
    expect(journal.some((e) => e.kind === "custom")).toBe(true);
    expect((await call(gateway, "GET", "/api/threads/kept/uploads/list")).body.files.map((f: { filename: string }) => f.filename)).toEqual(["data.csv"]);
    const artifact = await send(gateway, "GET", "/api/threads/kept/artifacts/mnt/user-data/uploads/data.csv");
    expect(await artifact.text()).toBe("a,b\n1,2\n");
    // What the run wrote into the sandbox came back too.
    expect((await send(gateway, "GET", "/api/threads/kept/artifacts/mnt/user-data/workspace/notes.md")).status).toBe(200);
  });

  it("scenario G31 across a restart: a run interrupted by shutdown is found interrupted by the next gateway, and the thread takes a new run", async () => {
    const dir = await mkdtemp(join(tmpdir(), "deerflow-acceptance-"));
    dirs.push(dir);
    const probe = resetGatewayProbe();
    const first = await acceptanceGateway({ plugins: [plugin("installProbe")] }, { storage: createFsKeyValue(dir) });
    await call(first.gateway, "POST", "/api/threads", { body: { thread_id: "cut" } });
    let held!: () => void;
    const inFlight = new Promise<void>((resolve) => (held = resolve));
    probe.hold = new Promise<void>(() => {});
    probe.onHeld = held;
    const created = await call(first.gateway, "POST", "/api/threads/cut/runs", { body: { input: human("Write a note about interruptions.") } });
    await inFlight;
    await first.gateway.shutdown();
    probe.hold = undefined;

    const second = await gatewayWith({ plugins: [plugin("installProbe")] }, { storage: createFsKeyValue(dir) });
    const { gateway } = second;
    expect((await call(gateway, "GET", `/api/threads/cut/runs/${created.body.run_id}`)).body.status).toBe("interrupted");
    // Cancelled, not paused on an interrupt(): the thread is free again, as LangGraph reports it.
    expect((await call(gateway, "GET", "/api/threads/cut")).body.status).toBe("idle");
    const values = (await call(gateway, "GET", "/api/threads/cut/state")).body.values;
    expect(JSON.stringify(values.messages)).toContain("Write a note about interruptions.");
    const again = await call(gateway, "POST", "/api/threads/cut/runs/wait", { body: { input: human("Write a note about resuming.") } });
    expect(again.status).toBe(200);
    expect((await call(gateway, "GET", "/api/threads/cut")).body.status).toBe("idle");
    expect((await call(gateway, "GET", "/api/threads/cut/runs")).body.map((r: { status: string }) => r.status)).toEqual(["success", "interrupted"]);
  });
});
