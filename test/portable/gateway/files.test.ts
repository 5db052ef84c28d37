// Thread files over HTTP (uploads, artifacts) through app.fetch only, so it also runs in Deno and Bun.
import { describe, expect, it } from "vitest";
import { FileNameError, uploadFileName } from "../../../src/gateway/files-names.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { BASE, T, bytesOf, detailOf, enc, file, harness, thread, uploadsOf } from "./files-harness.ts";
import type { Harness } from "./files-harness.ts";

const ALL_BYTES = new Uint8Array(Array.from({ length: 256 }, (_, i) => i));

describe("uploads", () => {
  it("stores text and binary files in the thread's sandbox and serves the same bytes back as artifacts", async () => {
    const h = harness();
    const response = await h.upload([file("notes.txt", "héllo ✓\n"), file("blob.bin", ALL_BYTES, "application/octet-stream")]);
    expect(response.status).toBe(200);
    const body = (await response.json()) as { success: boolean; files: Array<Record<string, unknown>>; message: string };
    expect(body).toEqual({
      success: true,
      message: "Successfully uploaded 2 file(s)",
      skipped_files: [],
      files: [
        {
          filename: "notes.txt",
          size: enc.encode("héllo ✓\n").length,
          path: "/mnt/user-data/uploads/notes.txt",
          virtual_path: "/mnt/user-data/uploads/notes.txt",
          artifact_url: `/api/threads/${T}/artifacts/mnt/user-data/uploads/notes.txt`,
        },
        {
          filename: "blob.bin",
          size: 256,
          path: "/mnt/user-data/uploads/blob.bin",
          virtual_path: "/mnt/user-data/uploads/blob.bin",
          artifact_url: `/api/threads/${T}/artifacts/mnt/user-data/uploads/blob.bin`,
        },
      ],
    });
    // The agent sees them at the virtual path, in the owner's sandbox.
    const sandbox = await h.sandboxOf("alice");
    expect(await sandbox.readFile("/mnt/user-data/uploads/notes.txt")).toBe("héllo ✓\n");
    expect((await sandbox.exec("wc -c < /mnt/user-data/uploads/blob.bin")).stdout.trim()).toBe("256");

    const text = await h.request(body.files[0]!.artifact_url as string);
    expect(text.status).toBe(200);
    expect(text.headers.get("content-type")).toBe("text/plain; charset=utf-8");
    expect(await text.text()).toBe("héllo ✓\n");
    const binary = await h.request(body.files[1]!.artifact_url as string);
    expect(binary.headers.get("content-type")).toBe("application/octet-stream");
    expect(binary.headers.get("content-length")).toBe("256");
    expect(await bytesOf(binary)).toEqual([...ALL_BYTES]);
  });

  it("renames duplicates within one request before the extension and replaces a file uploaded earlier", async () => {
    const h = harness();
    const first = await h.upload([file("a.txt", "1"), file("a.txt", "2"), file("a.txt", "3"), file("README", "r1"), file("README", "r2"), file(".env", "e1"), file(".env", "e2")]);
    expect(first.status).toBe(200);
    const files = ((await first.json()) as { files: Array<{ filename: string; original_filename?: string }> }).files;
    expect(files.map((f) => [f.filename, f.original_filename])).toEqual([
      ["a.txt", undefined],
      ["a_1.txt", "a.txt"],
      ["a_2.txt", "a.txt"],
      ["README", undefined],
      ["README_1", "README"],
      [".env", undefined],
      [".env_1", ".env"],
    ]);
    const sandbox = await h.sandboxOf("alice");
    expect(await sandbox.readFile("/mnt/user-data/uploads/a_2.txt")).toBe("3");

    const again = await h.upload([file("a.txt", "new")]);
    expect(((await again.json()) as { files: Array<{ filename: string }> }).files[0]!.filename).toBe("a.txt");
    expect(await sandbox.readFile("/mnt/user-data/uploads/a.txt")).toBe("new");
  });

  it("keeps only the last path component of a name the client sent with folders", async () => {
    const h = harness();
    const response = await h.upload([file("reports/2024/q1.csv", "a,b\n")]);
    expect(response.status).toBe(200);
    expect(((await response.json()) as { files: Array<{ filename: string }> }).files[0]!.filename).toBe("q1.csv");
    expect(await uploadsOf(h)).toEqual(["q1.csv"]);
  });

  it("percent-encodes the artifact URL of a name with spaces and non-ASCII characters, and that URL serves the file", async () => {
    const h = harness();
    const name = "Q1 report (final)#1 ✓.md";
    const response = await h.upload([file(name, "# hi\n")]);
    const info = ((await response.json()) as { files: Array<{ artifact_url: string; filename: string }> }).files[0]!;
    expect(info.filename).toBe(name);
    expect(info.artifact_url).toBe(`/api/threads/${T}/artifacts/mnt/user-data/uploads/Q1%20report%20%28final%29%231%20%E2%9C%93.md`);
    const served = await h.request(info.artifact_url);
    expect(served.status).toBe(200);
    expect(await served.text()).toBe("# hi\n");
    expect(served.headers.get("content-type")).toBe("text/markdown; charset=utf-8");
    expect(served.headers.get("content-disposition")).toBe(
      `inline; filename="Q1 report (final)#1 _.md"; filename*=UTF-8''Q1%20report%20%28final%29%231%20%E2%9C%93.md`,
    );
  });

  const REJECTED: Array<[string, string, RegExp]> = [
    // Multipart carries an empty file name as a text part; either way the answer says to name it.
    ["empty", "", /empty name|without a file name/],
    ["a dot", ".", /not a file name/],
    ["two dots", "..", /not a file name/],
    ["a folder ending in ..", "docs/..", /not a file name/],
    ["only a slash", "/", /no file name part/],
    ["a backslash", "C:\\Users\\me\\evil.txt", /backslash/],
    ["256 UTF-8 bytes", `${"é".repeat(126)}.txt`, /256 bytes .* limit is 255/],
    ["the staging name", ".upload-123.part", /reserved/],
  ];
  for (const [what, name, message] of REJECTED) {
    it(`refuses a file name with ${what} (400 naming it) and writes none of the request's files`, async () => {
      const h = harness();
      const response = await h.upload([file("fine.txt", "ok"), file(name, "x")]);
      expect(response.status).toBe(400);
      expect(await detailOf(response)).toMatch(message);
      expect(await uploadsOf(h)).toEqual([]);
    });
  }

  it("refuses NUL and control characters in a name, which FormData clients percent-encode and runtimes parse differently", () => {
    // Checked on the name itself: Node decodes %0A back to a line break, Deno rejects a raw NUL in
    // the part header and Bun cuts the name there, so only this layer sees the same input everywhere.
    expect(() => uploadFileName("a\0b.txt")).toThrow(/NUL/);
    for (const name of ["a\nb.txt", "a\rb.txt", "tab\there", "del\u007f"]) {
      expect(() => uploadFileName(name), JSON.stringify(name)).toThrow(FileNameError);
      expect(() => uploadFileName(name)).toThrow(/control character/);
    }
    expect(uploadFileName("dir/sub/ok ✓.txt")).toBe("ok ✓.txt");
    expect(uploadFileName("folder/")).toBe("folder");
  });

  it("accepts a name of exactly 255 UTF-8 bytes", async () => {
    const h = harness();
    const name = `${"é".repeat(125)}.txt`;
    expect(enc.encode(name).length).toBe(254);
    const longest = `${name}x`;
    expect((await h.upload([file(longest, "x")])).status).toBe(200);
    expect(await uploadsOf(h)).toEqual([longest]);
  });

  it("answers 400 when the request carries no files", async () => {
    const h = harness();
    const empty = await h.request(`/api/threads/${T}/uploads`, { method: "POST", body: new FormData() });
    expect(empty.status).toBe(400);
    expect(await detailOf(empty)).toMatch(/No files provided/);

    const otherField = await h.upload([file("a.txt", "x")], { field: "attachment" });
    expect(otherField.status).toBe(400);

    const text = await h.upload(["just text"]);
    expect(text.status).toBe(400);
    expect(await detailOf(text)).toMatch(/text, not a file/);

    const json = await h.request(`/api/threads/${T}/uploads`, { method: "POST", body: "{}", headers: { "content-type": "application/json" } });
    expect(json.status).toBe(400);
    expect(await detailOf(json)).toMatch(/multipart\/form-data/);

    const broken = await h.request(`/api/threads/${T}/uploads`, {
      method: "POST",
      body: "--x\r\nnot a part",
      headers: { "content-type": "multipart/form-data; boundary=x" },
    });
    expect(broken.status).toBe(400);
    expect(await uploadsOf(h)).toEqual([]);
  });

  it("answers 413 over the file count, and writes nothing", async () => {
    const h = harness({ limits: { maxFiles: 2 } });
    const response = await h.upload([file("1.txt", "1"), file("2.txt", "2"), file("3.txt", "3")]);
    expect(response.status).toBe(413);
    expect(await detailOf(response)).toMatch(/Too many files: 3 sent, at most 2/);
    expect(await uploadsOf(h)).toEqual([]);
    expect((await h.upload([file("1.txt", "1"), file("2.txt", "2")])).status).toBe(200);
  });

  it("answers 413 over the size of one file, naming it, and writes none of the others", async () => {
    const h = harness({ limits: { maxFileBytes: 10 } });
    const response = await h.upload([file("small.txt", "0123456789"), file("big.txt", "0123456789A")]);
    expect(response.status).toBe(413);
    expect(await detailOf(response)).toMatch(/File too large: "big.txt" is 11 bytes; the limit is 10 bytes/);
    expect(await uploadsOf(h)).toEqual([]);
  });

  it("answers 413 over the total size of a request, and writes nothing", async () => {
    const h = harness({ limits: { maxFileBytes: 15, maxTotalBytes: 20 } });
    const response = await h.upload([file("a.txt", "x".repeat(15)), file("b.txt", "y".repeat(15))]);
    expect(response.status).toBe(413);
    expect(await detailOf(response)).toMatch(/Total upload size too large: 30 bytes/);
    expect(await uploadsOf(h)).toEqual([]);
  });

  it("refuses a body whose Content-Length is over the limit without reading it", async () => {
    const h = harness({ limits: { maxTotalBytes: 1024, maxFiles: 1 } });
    let pulls = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        pulls++;
        controller.enqueue(new Uint8Array(1024));
      },
    });
    const response = await h.app.fetch(
      new Request(`${BASE}/api/threads/${T}/uploads`, {
        method: "POST",
        body,
        headers: { "content-type": "multipart/form-data; boundary=b", "content-length": String(10 * 1024 * 1024) },
        duplex: "half",
      } as RequestInit),
    );
    expect(response.status).toBe(413);
    expect(await detailOf(response)).toMatch(/request body is over/);
    // A stream may be pulled once to fill its queue when it is created; never read through.
    expect(pulls).toBeLessThanOrEqual(1);
  });

  it("stops reading a body without Content-Length once it passes the limit", async () => {
    const h = harness({ limits: { maxTotalBytes: 1024, maxFiles: 1 } });
    let sent = 0;
    const endless = new ReadableStream<Uint8Array>({
      pull(controller) {
        sent += 4096;
        controller.enqueue(enc.encode("x".repeat(4096)));
      },
    });
    const response = await h.app.fetch(
      new Request(`${BASE}/api/threads/${T}/uploads`, {
        method: "POST",
        body: endless,
        headers: { "content-type": "multipart/form-data; boundary=b" },
        duplex: "half",
      } as RequestInit),
    );
    expect(response.status).toBe(413);
    expect(sent).toBeLessThan(64 * 1024);
  });

  it("refuses a folder at a destination (409) before writing any file of the request", async () => {
    const h = harness();
    const sandbox = await h.sandboxOf("alice");
    await sandbox.exec("mkdir -p /mnt/user-data/uploads/taken.txt");
    const response = await h.upload([file("first.txt", "1"), file("taken.txt", "2")]);
    expect(response.status).toBe(409);
    expect(await detailOf(response)).toMatch(/taken\.txt.*folder or a link/);
    expect(await sandbox.exists("/mnt/user-data/uploads/first.txt")).toBe(false);
  });

  it("keeps every earlier file as it was, and no stored byte of the request, when a storage write fails midway", async () => {
    const storage = createMemoryKeyValue();
    const h = harness({ storage });
    expect((await h.upload([file("keep.txt", "original")])).status).toBe(200);
    const setItemRaw = storage.setItemRaw.bind(storage);
    let writes = 0;
    storage.setItemRaw = (async (key: string, value: unknown) => {
      if (++writes === 3) throw new Error("disk full.");
      return setItemRaw(key, value);
    }) as typeof storage.setItemRaw;
    const response = await h.upload([file("keep.txt", "replaced"), file("new.txt", "n"), file("third.txt", "t")]);
    expect(response.status).toBe(500);
    expect(await detailOf(response)).toMatch(/disk full/);
    expect(await (await h.request(`/api/threads/${T}/artifacts/mnt/user-data/uploads/keep.txt`)).text()).toBe("original");
    expect(await uploadsOf(h)).toEqual(["keep.txt"]);
    // Only keep.txt's one record is left: the failed request's records were removed with it.
    expect(await storage.getKeys(`sandbox:uploads:alice:${T}:data`)).toHaveLength(1);
  });

  it("is in storage when acknowledged: another provider over the same storage (a restart) lists and serves it, no sandbox held", async () => {
    const storage = createMemoryKeyValue();
    const h = harness({ storage });
    const big = Uint8Array.from({ length: 1_300_000 }, (_, i) => (i * 7919) % 251);
    expect((await h.upload([file("big.bin", big), file("note.txt", "hello")])).status).toBe(200);
    // The upload went to storage, not into a sandbox that stays in memory.
    expect(h.provider.get(`virtual:alice:${T}`)).toBeUndefined();
    expect((await storage.getKeys(`sandbox:uploads:alice:${T}:data`)).length).toBeGreaterThanOrEqual(4);

    const restarted = harness({ storage });
    const list = (await (await restarted.request(`/api/threads/${T}/uploads/list`)).json()) as { files: Array<{ filename: string; size: number }> };
    expect(list.files.map((f) => [f.filename, f.size])).toEqual([
      ["big.bin", big.length],
      ["note.txt", 5],
    ]);
    expect(await bytesOf(await restarted.request(`/api/threads/${T}/artifacts/mnt/user-data/uploads/big.bin`))).toEqual([...big]);
    const range = await restarted.request(`/api/threads/${T}/artifacts/mnt/user-data/uploads/big.bin`, { headers: { range: "bytes=600000-600009" } });
    expect(range.status).toBe(206);
    expect(await bytesOf(range)).toEqual([...big.subarray(600_000, 600_010)]);
    // A run's sandbox sees it in /mnt/user-data/uploads.
    const sandbox = await restarted.sandboxOf("alice");
    expect((await sandbox.exec("wc -c < /mnt/user-data/uploads/big.bin")).stdout.trim()).toBe(String(big.length));
  });

  it("an upload made while a run holds the sandbox shows up in it; what the run changes in uploads is stored at release", async () => {
    const storage = createMemoryKeyValue();
    const h = harness({ storage });
    expect((await h.upload([file("gone.txt", "bye"), file("kept.txt", "stay")])).status).toBe(200);
    const sandbox = await h.sandboxOf("alice");
    expect((await h.upload([file("during.txt", "mid-run")])).status).toBe(200);
    expect(await sandbox.readFile("/mnt/user-data/uploads/during.txt")).toBe("mid-run");
    await sandbox.exec("rm /mnt/user-data/uploads/gone.txt; echo made > /mnt/user-data/uploads/made.txt");
    await h.provider.release(sandbox.id);

    const restarted = harness({ storage });
    const list = (await (await restarted.request(`/api/threads/${T}/uploads/list`)).json()) as { files: Array<{ filename: string }> };
    expect(list.files.map((f) => f.filename)).toEqual(["during.txt", "kept.txt", "made.txt"]);
    expect(await (await restarted.request(`/api/threads/${T}/artifacts/mnt/user-data/uploads/made.txt`)).text()).toBe("made\n");
  });

  it("writes through the sandbox of a provider without an upload store, all or nothing", async () => {
    const h = harness({ withoutUploadStore: true });
    expect((await h.upload([file("a.txt", "first"), file("b.bin", ALL_BYTES)])).status).toBe(200);
    expect(await bytesOf(await h.request(`/api/threads/${T}/artifacts/mnt/user-data/uploads/b.bin`))).toEqual([...ALL_BYTES]);
    const sandbox = await h.sandboxOf("alice");
    await sandbox.exec("mkdir -p /mnt/user-data/uploads/taken.txt");
    const refused = await h.upload([file("a.txt", "second"), file("taken.txt", "x")]);
    expect(refused.status).toBe(409);
    expect(await sandbox.readFile("/mnt/user-data/uploads/a.txt")).toBe("first");
    expect(await uploadsOf(h)).toEqual(["a.txt", "b.bin", "taken.txt"]);
  });

  it("lands in the caller's sandbox when the thread does not exist yet, where the caller's first run looks", async () => {
    const h = harness();
    expect((await h.upload([file("early.txt", "e")], { threadId: "new-thread", user: "bob" })).status).toBe(200);
    expect(h.guardCalls.at(-1)).toEqual({ permission: "threads:write", threadId: "new-thread", requireExisting: false });
    expect(await (await h.sandboxOf("bob", "new-thread")).readFile("/mnt/user-data/uploads/early.txt")).toBe("e");
    h.threads.set("new-thread", thread("new-thread", "bob"));
    const list = await h.request("/api/threads/new-thread/uploads/list", { user: "bob" });
    expect(((await list.json()) as { count: number }).count).toBe(1);
  });

  it("uses the owner's sandbox for an owned thread and the caller's for an ownerless one", async () => {
    const h = harness();
    h.threads.set("shared", thread("shared", null));
    expect((await h.upload([file("mine.txt", "c")], { threadId: "shared", user: "carol" })).status).toBe(200);
    expect(await (await h.sandboxOf("carol", "shared")).exists("/mnt/user-data/uploads/mine.txt")).toBe(true);
    expect(await (await h.sandboxOf("alice", "shared")).exists("/mnt/user-data/uploads/mine.txt")).toBe(false);
  });

  it("needs threads:write, and hides another owner's thread behind a 404", async () => {
    const h = harness();
    const denied = await h.upload([file("a.txt", "x")], { deny: ["threads:write"] });
    expect(denied.status).toBe(403);
    expect(await detailOf(denied)).toBe("Permission denied: threads:write");
    const foreign = await h.upload([file("a.txt", "x")], { user: "mallory" });
    expect(foreign.status).toBe(404);
    expect(await uploadsOf(h)).toEqual([]);
    expect(await (await h.sandboxOf("mallory")).list("/mnt/user-data/uploads")).toEqual([]);
  });

  it("answers 422 for a thread id that could name another folder", async () => {
    const h = harness();
    for (const id of ["a.b", "a%2Fb", "a%20b", "x".repeat(65)]) {
      const response = await h.request(`/api/threads/${id}/uploads/list`);
      expect(response.status, id).toBe(422);
      expect(await detailOf(response)).toMatch(/Invalid thread_id/);
    }
  });
});

describe("upload list, limits and delete", () => {
  it("lists the uploaded files (not folders, not staging files) sorted by name, with their URLs", async () => {
    const h = harness();
    await h.upload([file("b.csv", "1,2\n"), file("a.txt", "hello")]);
    const sandbox = await h.sandboxOf("alice");
    await sandbox.exec("mkdir -p /mnt/user-data/uploads/folder && echo x > /mnt/user-data/uploads/.upload-1.part");
    const response = await h.request(`/api/threads/${T}/uploads/list`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({
      count: 2,
      files: [
        {
          filename: "a.txt",
          size: 5,
          extension: ".txt",
          path: "/mnt/user-data/uploads/a.txt",
          virtual_path: "/mnt/user-data/uploads/a.txt",
          artifact_url: `/api/threads/${T}/artifacts/mnt/user-data/uploads/a.txt`,
        },
        {
          filename: "b.csv",
          size: 4,
          extension: ".csv",
          path: "/mnt/user-data/uploads/b.csv",
          virtual_path: "/mnt/user-data/uploads/b.csv",
          artifact_url: `/api/threads/${T}/artifacts/mnt/user-data/uploads/b.csv`,
        },
      ],
    });
    expect((await h.request(`/api/threads/${T}/uploads/list`, { deny: ["threads:read"] })).status).toBe(403);
    expect((await h.request(`/api/threads/${T}/uploads/list`, { user: "mallory" })).status).toBe(404);
  });

  it("an empty thread lists no files", async () => {
    const h = harness();
    expect(await (await h.request(`/api/threads/${T}/uploads/list`)).json()).toEqual({ files: [], count: 0 });
  });

  it("reports the configured limits", async () => {
    const h = harness({ limits: { maxFiles: 3 } });
    const response = await h.request(`/api/threads/${T}/uploads/limits`);
    expect(await response.json()).toEqual({ max_files: 3, max_file_size: 50 * 1024 * 1024, max_total_size: 100 * 1024 * 1024 });
    expect((await h.request(`/api/threads/${T}/uploads/limits`, { deny: ["threads:read"] })).status).toBe(403);
  });

  it("refuses limits that are not whole positive numbers when the routes are built", () => {
    expect(() => harness({ limits: { maxFiles: 0 } })).toThrow(/limits\.maxFiles/);
    expect(() => harness({ limits: { maxTotalBytes: 1.5 } })).toThrow(/limits\.maxTotalBytes/);
  });

  it("deletes one uploaded file, 404 when it is not there", async () => {
    const h = harness();
    await h.upload([file("a b.txt", "1"), file("c.txt", "2")]);
    const response = await h.request(`/api/threads/${T}/uploads/${encodeURIComponent("a b.txt")}`, { method: "DELETE" });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ success: true, message: "Deleted a b.txt" });
    expect(h.guardCalls.at(-1)).toEqual({ permission: "threads:delete", threadId: T, requireExisting: true });
    expect(await uploadsOf(h)).toEqual(["c.txt"]);
    const missing = await h.request(`/api/threads/${T}/uploads/a%20b.txt`, { method: "DELETE" });
    expect(missing.status).toBe(404);
    expect(await detailOf(missing)).toBe("File not found: a b.txt");
  });

  it("refuses to delete through a name that is not a bare file name", async () => {
    const h = harness();
    const sandbox = await h.sandboxOf("alice");
    await sandbox.writeFile("/mnt/user-data/outputs/report.md", "keep");
    // A bare `..` segment never reaches the route: URL parsing resolves it first.
    for (const name of ["..%2Foutputs%2Freport.md", "%2E%2E%2Foutputs%2Freport.md", "a%5Cb", "a%00b", "a%0Ab"]) {
      const response = await h.request(`/api/threads/${T}/uploads/${name}`, { method: "DELETE" });
      expect(response.status, name).toBe(400);
    }
    expect(await sandbox.readFile("/mnt/user-data/outputs/report.md")).toBe("keep");
  });

  it("deleting a folder in uploads is refused", async () => {
    const h = harness();
    await (await h.sandboxOf("alice")).exec("mkdir -p /mnt/user-data/uploads/dir");
    expect((await h.request(`/api/threads/${T}/uploads/dir`, { method: "DELETE" })).status).toBe(400);
  });

  it("delete needs an existing thread the caller may delete from, and waits for the run to finish", async () => {
    const h = harness({ withActiveRuns: true });
    await h.upload([file("a.txt", "1")]);
    expect((await h.request(`/api/threads/${T}/uploads/a.txt`, { method: "DELETE", deny: ["threads:delete"] })).status).toBe(403);
    expect((await h.request("/api/threads/nope/uploads/a.txt", { method: "DELETE" })).status).toBe(404);
    expect((await h.request(`/api/threads/${T}/uploads/a.txt`, { method: "DELETE", user: "mallory" })).status).toBe(404);
    h.activeRuns.add(T);
    const busy = await h.request(`/api/threads/${T}/uploads/a.txt`, { method: "DELETE" });
    expect(busy.status).toBe(409);
    expect(await detailOf(busy)).toMatch(/run in flight/);
    expect(await uploadsOf(h)).toEqual(["a.txt"]);
    h.activeRuns.delete(T);
    expect((await h.request(`/api/threads/${T}/uploads/a.txt`, { method: "DELETE" })).status).toBe(200);
  });
});

describe("artifacts", () => {
  async function withOutput(h: Harness, name: string, content: string | Uint8Array): Promise<void> {
    const sandbox = await h.sandboxOf("alice");
    if (typeof content === "string") await sandbox.writeFile(`/mnt/user-data/outputs/${name}`, content);
    else await sandbox.writeFileBytes(`/mnt/user-data/outputs/${name}`, content);
  }

  it("serves a file the agent wrote to outputs, inline with its content type and nosniff", async () => {
    const h = harness();
    const sandbox = await h.sandboxOf("alice");
    await sandbox.exec("mkdir -p /mnt/user-data/outputs/charts && printf '{\"ok\":true}' > /mnt/user-data/outputs/charts/data.json");
    const response = await h.request(`/api/threads/${T}/artifacts/mnt/user-data/outputs/charts/data.json`);
    expect(response.status).toBe(200);
    expect(await response.text()).toBe('{"ok":true}');
    expect(response.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect(response.headers.get("x-content-type-options")).toBe("nosniff");
    expect(response.headers.get("accept-ranges")).toBe("bytes");
    expect(response.headers.get("content-disposition")).toMatch(/^inline; /);
    expect(h.guardCalls.at(-1)).toEqual({ permission: "threads:read", threadId: T, requireExisting: false });
  });

  it("chooses the content type from the extension, else plain text for text and an octet stream for the rest", async () => {
    const h = harness();
    const cases: Array<[string, string | Uint8Array, string]> = [
      ["a.png", new Uint8Array([0x89, 0x50, 0x4e, 0x47]), "image/png"],
      ["a.JPG", new Uint8Array([0xff, 0xd8]), "image/jpeg"],
      ["a.pdf", "%PDF-1.4", "application/pdf"],
      ["a.csv", "a,b", "text/csv; charset=utf-8"],
      ["a.py", "print(1)", "text/x-python; charset=utf-8"],
      ["a.ts", "export {}", "text/plain; charset=utf-8"],
      ["Makefile", "all:\n\techo ✓\n", "text/plain; charset=utf-8"],
      ["data.unknown", new Uint8Array([0x00, 0x01, 0x02]), "application/octet-stream"],
      ["latin1.unknown", new Uint8Array([0x63, 0x61, 0x66, 0xe9]), "application/octet-stream"],
    ];
    for (const [name, content] of cases) await withOutput(h, name, content);
    for (const [name, , type] of cases) {
      const response = await h.request(`/api/threads/${T}/artifacts/mnt/user-data/outputs/${name}`);
      expect(response.headers.get("content-type"), name).toBe(type);
    }
  });

  it("always sends HTML, XHTML, SVG and XML as attachments, whatever ?download says", async () => {
    const h = harness();
    for (const name of ["page.html", "page.htm", "page.xhtml", "logo.svg", "feed.xml"]) {
      await withOutput(h, name, "<html><script>alert(1)</script></html>");
      for (const query of ["", "?download=false"]) {
        const response = await h.request(`/api/threads/${T}/artifacts/mnt/user-data/outputs/${name}${query}`);
        expect(response.status).toBe(200);
        expect(response.headers.get("content-disposition"), name).toBe(`attachment; filename="${name}"; filename*=UTF-8''${name}`);
        expect(response.headers.get("x-content-type-options")).toBe("nosniff");
      }
    }
  });

  it("?download=true makes any file an attachment", async () => {
    const h = harness();
    await withOutput(h, "notes.txt", "n");
    const inline = await h.request(`/api/threads/${T}/artifacts/mnt/user-data/outputs/notes.txt`);
    expect(inline.headers.get("content-disposition")).toMatch(/^inline;/);
    const download = await h.request(`/api/threads/${T}/artifacts/mnt/user-data/outputs/notes.txt?download=true`);
    expect(download.headers.get("content-disposition")).toMatch(/^attachment;/);
    expect(await download.text()).toBe("n");
  });

  it("serves byte ranges with 206 and Content-Range, and 416 for a range past the end", async () => {
    const h = harness();
    await withOutput(h, "digits.bin", enc.encode("0123456789"));
    const url = `/api/threads/${T}/artifacts/mnt/user-data/outputs/digits.bin`;
    const cases: Array<[string, string, string]> = [
      ["bytes=0-3", "0123", "bytes 0-3/10"],
      ["bytes=7-", "789", "bytes 7-9/10"],
      ["bytes=-3", "789", "bytes 7-9/10"],
      ["bytes=8-100", "89", "bytes 8-9/10"],
      ["bytes=-50", "0123456789", "bytes 0-9/10"],
    ];
    for (const [range, body, contentRange] of cases) {
      const response = await h.request(url, { headers: { range } });
      expect(response.status, range).toBe(206);
      expect(response.headers.get("content-range")).toBe(contentRange);
      expect(response.headers.get("content-length")).toBe(String(body.length));
      expect(await response.text()).toBe(body);
    }
    for (const range of ["bytes=10-", "bytes=10-20", "bytes=-0"]) {
      const response = await h.request(url, { headers: { range } });
      expect(response.status, range).toBe(416);
      expect(response.headers.get("content-range")).toBe("bytes */10");
      expect(await detailOf(response)).toMatch(/not satisfiable/);
    }
    // Not understood (several ranges, another unit, reversed) or not provably current: the whole file.
    const ignored: Array<Record<string, string>> = [{ range: "bytes=0-1,4-5" }, { range: "items=0-1" }, { range: "bytes=5-2" }, { range: "bytes=0-1", "if-range": '"etag"' }];
    for (const headers of ignored) {
      const response = await h.request(url, { headers });
      expect(response.status, JSON.stringify(headers)).toBe(200);
      expect(await response.text()).toBe("0123456789");
    }
  });

  it("answers 404 for a missing file and 400 for a folder", async () => {
    const h = harness();
    const missing = await h.request(`/api/threads/${T}/artifacts/mnt/user-data/outputs/none.txt`);
    expect(missing.status).toBe(404);
    expect(await detailOf(missing)).toBe("Artifact not found: /mnt/user-data/outputs/none.txt");
    expect((await h.request(`/api/threads/${T}/artifacts/mnt/user-data/outputs`)).status).toBe(400);
  });

  it("refuses every path escape with 403 and never serves a file from outside the thread's folders", async () => {
    const h = harness();
    const sandbox = await h.sandboxOf("alice");
    // Files the sandbox's shell can reach outside /mnt/user-data must stay out of reach over HTTP.
    await sandbox.exec("mkdir -p /tmp/outside && echo secret > /tmp/outside/secret.txt && echo root > /secret.txt");
    await sandbox.exec("ln -s /tmp/outside /mnt/user-data/outputs/escape");
    await sandbox.writeFile("/mnt/user-data/uploads/inside.txt", "inside");
    const escapes = [
      "mnt/user-data/outputs/..%2F..%2F..%2Fsecret.txt",
      "mnt/user-data/outputs/%2E%2E/%2E%2E/%2E%2E/secret.txt",
      "mnt/user-data/outputs/%2e%2e%2f%2e%2e%2f%2e%2e%2fsecret.txt",
      "mnt/user-data/../../secret.txt",
      "mnt/user-data/outputs/../workspace/../../../secret.txt",
      "secret.txt",
      "%2Fsecret.txt",
      "tmp/outside/secret.txt",
      "mnt/user-data",
      "mnt/user-data/secret.txt",
      "mnt/user-data-other/secret.txt",
      "mnt/user-data/outputs/escape/secret.txt",
      "mnt/user-data/outputs/a%00b",
      // `..` is refused even when it would land back inside.
      "mnt/user-data/outputs/..%2Fuploads%2Finside.txt",
    ];
    for (const path of escapes) {
      const response = await h.request(`/api/threads/${T}/artifacts/${path}`);
      expect(response.status, path).toBe(403);
      expect(await response.text()).not.toContain("secret\n");
    }
    // Encoded twice, `..` is a literal folder name, not a way out.
    const literal = await h.request(`/api/threads/${T}/artifacts/mnt/user-data/outputs/%252e%252e/secret.txt`);
    expect(literal.status).toBe(404);
  });

  it("needs threads:read and hides another owner's thread", async () => {
    const h = harness();
    await withOutput(h, "r.md", "x");
    const url = `/api/threads/${T}/artifacts/mnt/user-data/outputs/r.md`;
    const denied = await h.request(url, { deny: ["threads:read"] });
    expect(denied.status).toBe(403);
    expect(await detailOf(denied)).toBe("Permission denied: threads:read");
    expect((await h.request(url, { user: "mallory" })).status).toBe(404);
    expect((await h.request(url)).status).toBe(200);
  });
});
