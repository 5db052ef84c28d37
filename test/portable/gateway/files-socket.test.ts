// Thread files through a real HTTP server on 127.0.0.1: FormData uploads as a browser or script sends them.
import { afterEach, describe, expect, it } from "vitest";
import type { HttpServerHandle } from "../../../src/ports/http-server.ts";
import { T, harness } from "./files-harness.ts";
import type { Harness } from "./files-harness.ts";
import { runtimeServe } from "./runtime-serve.ts";

const { runtime, serve } = await runtimeServe();
const servers: HttpServerHandle[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

async function listen(h: Harness): Promise<string> {
  const server = await serve((request) => h.app.fetch(request), { hostname: "127.0.0.1", port: 0 });
  servers.push(server);
  return server.url;
}

/** Deterministic bytes covering every value, so a text or encoding round trip would show. */
function pattern(length: number): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(length);
  let x = 7;
  for (let i = 0; i < length; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    bytes[i] = x >>> 24;
  }
  return bytes;
}

describe(`thread files over ${runtime}'s socket`, () => {
  it("a FormData upload through fetch lands in the sandbox and comes back byte for byte, whole and in ranges", async () => {
    const h = harness();
    const url = await listen(h);
    const binary = pattern(3 * 1024 * 1024 + 17);
    const form = new FormData();
    form.append("files", new Blob([binary], { type: "application/octet-stream" }), "photo.raw");
    form.append("files", new Blob(["# Notes ✓\n"], { type: "text/markdown" }), "notes.md");

    const response = await fetch(`${url}/api/threads/${T}/uploads`, { method: "POST", body: form });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { files: Array<{ filename: string; size: number; artifact_url: string }> };
    expect(body.files.map((f) => [f.filename, f.size])).toEqual([
      ["photo.raw", binary.length],
      ["notes.md", new TextEncoder().encode("# Notes ✓\n").length],
    ]);
    const sandbox = await h.sandboxOf("alice");
    expect((await sandbox.readFileBytes("/mnt/user-data/uploads/photo.raw")).length).toBe(binary.length);

    const whole = await fetch(`${url}${body.files[0]!.artifact_url}`);
    expect(whole.status).toBe(200);
    expect(Buffer.from(await whole.arrayBuffer()).equals(Buffer.from(binary))).toBe(true);

    const part = await fetch(`${url}${body.files[0]!.artifact_url}`, { headers: { range: "bytes=1048576-1048591" } });
    expect(part.status).toBe(206);
    expect(part.headers.get("content-range")).toBe(`bytes 1048576-1048591/${binary.length}`);
    expect([...new Uint8Array(await part.arrayBuffer())]).toEqual([...binary.subarray(1048576, 1048592)]);

    const notes = await fetch(`${url}${body.files[1]!.artifact_url}`);
    expect(notes.headers.get("content-type")).toBe("text/markdown; charset=utf-8");
    expect(await notes.text()).toBe("# Notes ✓\n");

    const list = (await (await fetch(`${url}/api/threads/${T}/uploads/list`)).json()) as { count: number };
    expect(list.count).toBe(2);
  });

  it("a client sending more than the limit gets the 413 answer", async () => {
    const h = harness({ limits: { maxFiles: 1, maxFileBytes: 1024, maxTotalBytes: 1024 } });
    const url = await listen(h);
    const form = new FormData();
    form.append("files", new Blob([pattern(256 * 1024)]), "big.bin");
    const response = await fetch(`${url}/api/threads/${T}/uploads`, { method: "POST", body: form });
    expect(response.status).toBe(413);
    expect(((await response.json()) as { detail: string }).detail).toMatch(/too large/i);
    expect(await (await h.sandboxOf("alice")).list("/mnt/user-data/uploads")).toEqual([]);
  });
});
