import { describe, expect, it } from "vitest";
import { serializeValues } from "../../../src/runtime/serialize.ts";
import { call, testGateway } from "./threads-fixtures.ts";

// Issue 12, point 5 through app.fetch (any runtime): what the gateway used to accept silently.
const say = { input: { messages: [{ type: "human", content: "hi" }] } };

async function runCount(gateway: Awaited<ReturnType<typeof testGateway>>, threadId: string): Promise<number> {
  const listed = await call(gateway, "GET", `/api/threads/${threadId}/runs`);
  expect(listed.status).toBe(200);
  return (listed.body as unknown[]).length;
}

describe("a run body must be a JSON object", () => {
  it("[], null, a string or a number as the body is a 422 naming the body, and no run is created", async () => {
    const gateway = await testGateway();
    await call(gateway, "POST", "/api/threads", { thread_id: "t-body" });
    for (const raw of ["[]", "null", '"x"', "42"]) {
      for (const route of ["/api/threads/t-body/runs", "/api/threads/t-body/runs/wait", "/api/threads/t-body/runs/stream"]) {
        const res = await call(gateway, "POST", route, raw);
        expect(res.status, `${route} ${raw}`).toBe(422);
        expect(res.body.detail).toMatch(/^body: expected a JSON object, got /);
      }
      const stateless = await call(gateway, "POST", "/api/runs/wait", raw);
      expect(stateless.status).toBe(422);
    }
    expect(await runCount(gateway, "t-body")).toBe(0);
    // An object body still runs.
    expect((await call(gateway, "POST", "/api/threads/t-body/runs/wait", say)).status).toBe(200);
    expect(await runCount(gateway, "t-body")).toBe(1);
    await gateway.shutdown();
  });

  it("a zero, negative or fractional recursion_limit is a 422, not the default 100, and creates no run", async () => {
    const gateway = await testGateway();
    await call(gateway, "POST", "/api/threads", { thread_id: "t-limit" });
    for (const limit of [-1, 0, 2.5, "10", true]) {
      const res = await call(gateway, "POST", "/api/threads/t-limit/runs", { ...say, config: { recursion_limit: limit } });
      expect(res.status, String(limit)).toBe(422);
      expect(res.body.detail).toContain("config.recursion_limit: expected a whole number >= 1");
    }
    expect(await runCount(gateway, "t-limit")).toBe(0);
    await gateway.shutdown();
  });

  it("metadata, context, input and config that are arrays are a 422 naming the field", async () => {
    const gateway = await testGateway();
    await call(gateway, "POST", "/api/threads", { thread_id: "t-meta" });
    for (const [field, body] of [
      ["metadata", { ...say, metadata: [] }],
      ["context", { ...say, context: [1] }],
      ["config", { ...say, config: [] }],
      ["input", { input: [] }],
    ] as const) {
      const res = await call(gateway, "POST", "/api/threads/t-meta/runs", body);
      expect(res.status, field).toBe(422);
      expect(res.body.detail).toContain(`${field}: expected a JSON object, got an array`);
    }
    expect(await runCount(gateway, "t-meta")).toBe(0);
    await gateway.shutdown();
  });
});

describe("thread and search bodies", () => {
  it("metadata must be an object on thread create, patch and search; [] is a 422 and changes nothing", async () => {
    const gateway = await testGateway();
    const created = await call(gateway, "POST", "/api/threads", { metadata: [] });
    expect(created.status).toBe(422);
    expect(created.body.detail).toContain("metadata: expected a JSON object, got an array");
    expect((await call(gateway, "POST", "/api/threads/search", {})).body).toEqual([]);

    await call(gateway, "POST", "/api/threads", { thread_id: "t-m", metadata: { keep: 1 } });
    const patched = await call(gateway, "PATCH", "/api/threads/t-m", { metadata: [] });
    expect(patched.status).toBe(422);
    expect(patched.body.detail).toContain("metadata: expected a JSON object, got an array");
    expect((await call(gateway, "GET", "/api/threads/t-m")).body.metadata).toEqual({ keep: 1 });

    const searched = await call(gateway, "POST", "/api/threads/search", { metadata: [] });
    expect(searched.status).toBe(422);
    expect(searched.body.detail).toContain("metadata: expected a JSON object, got an array");
    const assistants = await call(gateway, "POST", "/api/assistants/search", { metadata: [] });
    expect(assistants.status).toBe(422);
    await gateway.shutdown();
  });

  it("a body that is not an object is a 422 on every thread body route, and creates nothing", async () => {
    const gateway = await testGateway();
    await call(gateway, "POST", "/api/threads", { thread_id: "t-b" });
    for (const raw of ["[]", "null", '"x"']) {
      for (const [method, path] of [
        ["POST", "/api/threads"],
        ["POST", "/api/threads/search"],
        ["PATCH", "/api/threads/t-b"],
        ["POST", "/api/threads/t-b/state"],
        ["POST", "/api/threads/t-b/history"],
        ["POST", "/api/assistants/search"],
      ] as const) {
        const res = await call(gateway, method, path, raw);
        expect(res.status, `${method} ${path} ${raw}`).toBe(422);
        expect(res.body.detail).toContain("expected a JSON object, got");
      }
    }
    expect((await call(gateway, "POST", "/api/threads/search", {})).body.map((t: { thread_id: string }) => t.thread_id)).toEqual(["t-b"]);
    await gateway.shutdown();
  });

  it("negative or zero limits and negative offsets are a 422 on search bodies and list queries", async () => {
    const gateway = await testGateway();
    await call(gateway, "POST", "/api/threads", { thread_id: "t-l" });
    for (const body of [{ limit: 0 }, { limit: -1 }, { offset: -1 }, { limit: 1.5 }]) {
      expect((await call(gateway, "POST", "/api/threads/search", body)).status, JSON.stringify(body)).toBe(422);
      expect((await call(gateway, "POST", "/api/assistants/search", body)).status, JSON.stringify(body)).toBe(422);
    }
    expect((await call(gateway, "POST", "/api/threads/t-l/history", { limit: 0 })).status).toBe(422);
    for (const query of ["limit=0", "limit=-1", "offset=-1"]) {
      expect((await call(gateway, "GET", `/api/threads/t-l/runs?${query}`)).status, query).toBe(422);
    }
    expect((await call(gateway, "GET", "/api/threads/t-l/history?limit=0")).status).toBe(422);
    for (const query of ["after_seq=-2", "after_seq=-100", "limit=0", "limit=-1"]) {
      const res = await call(gateway, "GET", `/api/threads/t-l/runs/some-run/events?${query}`);
      expect(res.status, query).toBe(422);
      expect(res.body.detail).toContain(`${query.split("=")[0]} must be a whole number`);
    }
    // -1 (from the first entry) is still the default and allowed: an unknown run is then a 404.
    expect((await call(gateway, "GET", "/api/threads/t-l/runs/some-run/events?after_seq=-1")).status).toBe(404);
    await gateway.shutdown();
  });
});

describe("wrong methods", () => {
  it("a known path asked with a method it does not serve is a 405 with Allow; an unknown path stays a 404", async () => {
    const gateway = await testGateway();
    for (const [method, path, allow] of [
      ["DELETE", "/api/threads", "POST"],
      ["GET", "/api/threads", "POST"],
      ["PUT", "/api/threads/some-thread", "GET, HEAD, PATCH, DELETE"],
      ["POST", "/api/ok", "GET, HEAD"],
      ["DELETE", "/api/threads/t/runs/r/stream", "GET, HEAD, POST"],
      ["PATCH", "/health", "GET, HEAD"],
      ["GET", "/api/runs/wait", "POST"],
    ] as const) {
      const res = await call(gateway, method, path);
      expect(res.status, `${method} ${path}`).toBe(405);
      expect(res.headers.get("allow")).toBe(allow);
      expect(res.body.detail).toBe(`Method ${method} is not allowed on this path; it answers ${allow}.`);
    }
    const head = await call(gateway, "HEAD", "/api/threads");
    expect([head.status, head.headers.get("allow")]).toEqual([405, "POST"]);
    for (const path of ["/api/nope", "/api/threads/t/runs/r/nope", "/nothing"]) {
      const res = await call(gateway, "GET", path);
      expect([res.status, res.body], path).toEqual([404, { detail: "Not found" }]);
      expect(res.headers.get("allow")).toBeNull();
    }
    expect((await call(gateway, "GET", "/api/ok")).status).toBe(200);
    await gateway.shutdown();
  });
});

describe("no host path in an API response", () => {
  it("a run's thread state and values frames show thread_data as /mnt/user-data paths only", async () => {
    const gateway = await testGateway();
    await call(gateway, "POST", "/api/threads", { thread_id: "t-paths" });
    const waited = await call(gateway, "POST", "/api/threads/t-paths/runs/wait", say);
    expect(waited.status).toBe(200);
    const virtual = { workspace_path: "/mnt/user-data/workspace", uploads_path: "/mnt/user-data/uploads", outputs_path: "/mnt/user-data/outputs" };
    expect(waited.body.thread_data).toEqual(virtual);
    const state = await call(gateway, "GET", "/api/threads/t-paths/state");
    expect(state.body.values.thread_data).toEqual(virtual);
    const history = await call(gateway, "GET", "/api/threads/t-paths/history");
    const base = gateway.deps.config.storage.base;
    for (const text of [JSON.stringify(state.body), JSON.stringify(history.body), JSON.stringify(waited.body)]) {
      expect(text).not.toContain(`${base}/users`);
      expect(text).not.toContain("/threads/t-paths/user-data");
    }
    await gateway.shutdown();
  });

  it("a checkpoint written with host paths (before the fix) is shown with the virtual ones", () => {
    const values = serializeValues({
      thread_data: {
        workspace_path: "/home/op/.deer-flow/users/u/threads/t/user-data/workspace",
        uploads_path: "/home/op/.deer-flow/users/u/threads/t/user-data/uploads",
        outputs_path: "/home/op/.deer-flow/users/u/threads/t/user-data/outputs",
      },
    });
    expect(values.thread_data).toEqual({ workspace_path: "/mnt/user-data/workspace", uploads_path: "/mnt/user-data/uploads", outputs_path: "/mnt/user-data/outputs" });
  });
});
