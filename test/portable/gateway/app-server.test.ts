import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { Client } from "@langchain/langgraph-sdk";
import { createGateway } from "../../../src/gateway/app.ts";
import { GATEWAY_VERSION } from "../../../src/gateway/routes/system.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { runtimeServe } from "./runtime-serve.ts";
import { config } from "./threads-fixtures.ts";

const { runtime, serve } = await runtimeServe();

describe("the gateway on a real socket", () => {
  it(`serves the SDK over 127.0.0.1 with the default (auth disabled) layer (${runtime})`, async () => {
    const gateway = await createGateway({ config, storage: createMemoryKeyValue() });
    const server = await serve(gateway.fetch, { hostname: "127.0.0.1", port: 0 });
    try {
      const client = new Client({ apiUrl: `${server.url}/api`, apiKey: null, callerOptions: { maxRetries: 0 } });
      const thread = await client.threads.create({ metadata: { via: "socket" } });
      await client.threads.updateState(thread.thread_id, { values: { title: "Over TCP" }, asNode: "model" });
      expect((await client.threads.getState<{ title: string }>(thread.thread_id)).values.title).toBe("Over TCP");
      expect((await client.threads.search()).map((t) => t.thread_id)).toEqual([thread.thread_id]);
      expect((await client.assistants.search()).map((a) => a.assistant_id)).toEqual(["lead_agent"]);
      const health = await fetch(`${server.url}/health`);
      expect(await health.json()).toEqual({ status: "healthy", service: "deerflow-edge" });
    } finally {
      await server.close();
      await gateway.shutdown();
    }
  });

  it("reports the package version in /api/info", async () => {
    const pkg = JSON.parse(await readFile(new URL("../../../package.json", import.meta.url), "utf8")) as { version: string };
    expect(GATEWAY_VERSION).toBe(pkg.version);
  });
});
