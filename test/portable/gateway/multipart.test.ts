// The streaming multipart reader behind uploads: every part's body arrives in pieces, never whole.
import { describe, expect, it } from "vitest";
import { MultipartSyntaxError, multipartBoundary, readMultipart } from "../../../src/gateway/multipart.ts";
import type { MultipartPartInfo } from "../../../src/gateway/multipart.ts";

const enc = new TextEncoder();

/** A stream that hands out `bytes` in pieces of `size` (the last one shorter). */
function piecewise(bytes: Uint8Array, size: number): ReadableStream<Uint8Array> {
  let offset = 0;
  return new ReadableStream({
    pull(controller) {
      if (offset >= bytes.length) return controller.close();
      controller.enqueue(bytes.slice(offset, offset + size));
      offset += size;
    },
  });
}

interface Parsed {
  info: MultipartPartInfo;
  body: number[];
  writes: number;
}

async function parse(body: ReadableStream<Uint8Array>, boundary: string): Promise<Parsed[]> {
  const parts: Parsed[] = [];
  await readMultipart(body, boundary, async (info) => {
    const part: Parsed = { info, body: [], writes: 0 };
    parts.push(part);
    return {
      async write(chunk) {
        part.writes++;
        part.body.push(...chunk);
      },
      async end() {},
    };
  });
  return parts;
}

async function formBody(form: FormData): Promise<{ bytes: Uint8Array; boundary: string }> {
  const request = new Request("http://x/", { method: "POST", body: form });
  const boundary = multipartBoundary(request.headers.get("content-type") ?? "");
  expect(boundary).toBeDefined();
  return { bytes: new Uint8Array(await request.arrayBuffer()), boundary: boundary! };
}

describe("readMultipart", () => {
  it("reads what this runtime's FormData sends, split at every byte, with CRLF and the boundary's own bytes inside the file", async () => {
    const tricky = enc.encode("line\r\n--not-the-boundary\r\n\r\n--\r\nend");
    const binary = Uint8Array.from({ length: 300 }, (_, i) => (i * 31) % 256);
    const form = new FormData();
    form.append("note", "plain text field");
    form.append("files", new File([tricky], "tricky.txt"));
    form.append("files", new File([binary], "日本語 name.bin"));
    form.append("files", new File([], "empty.dat"));
    const { bytes, boundary } = await formBody(form);
    for (const size of [1, 2, 3, 7, 64, 1000, bytes.length]) {
      const parts = await parse(piecewise(bytes, size), boundary);
      expect(parts.map((p) => [p.info.name, p.info.filename]), `pieces of ${size}`).toEqual([
        ["note", undefined],
        ["files", "tricky.txt"],
        ["files", "日本語 name.bin"],
        ["files", "empty.dat"],
      ]);
      expect(new TextDecoder().decode(new Uint8Array(parts[0]!.body))).toBe("plain text field");
      expect(parts[1]!.body).toEqual([...tricky]);
      expect(parts[2]!.body).toEqual([...binary]);
      expect(parts[3]!.body).toEqual([]);
    }
  });

  it("hands a large file on in many pieces rather than once, whole", async () => {
    const big = new Uint8Array(2 * 1024 * 1024).map((_, i) => i & 0xff);
    const form = new FormData();
    form.append("files", new File([big], "big.bin"));
    const { bytes, boundary } = await formBody(form);
    const [part] = await parse(piecewise(bytes, 64 * 1024), boundary);
    expect(part!.body.length).toBe(big.length);
    expect(part!.writes).toBeGreaterThan(16);
  });

  it("decodes filename* and HTML's %22, %0D and %0A in names, and nothing else", async () => {
    const boundary = "b0undary";
    const body = enc.encode(
      `preamble\r\n--${boundary}\r\n` +
        `Content-Disposition: form-data; name="files"; filename="a%22b%41.txt"\r\nContent-Type: text/plain\r\n\r\nx\r\n` +
        `--${boundary}\r\n` +
        `Content-Disposition: form-data; name="files"; filename="fallback.txt"; filename*=UTF-8''caf%C3%A9.txt\r\n\r\ny\r\n` +
        `--${boundary}--\r\nepilogue`,
    );
    const parts = await parse(piecewise(body, 5), boundary);
    expect(parts.map((p) => p.info.filename)).toEqual(['a"b%41.txt', "café.txt"]);
  });

  it("refuses a body without the closing boundary, a part without Content-Disposition, and endless headers", async () => {
    const cases: Array<[string, RegExp]> = [
      ["--x\r\nnot a part", /ended before the closing boundary/],
      ["--x\r\nContent-Type: text/plain\r\n\r\nbody\r\n--x--", /no "Content-Disposition: form-data"/],
      [`--x\r\nX-Filler: ${"a".repeat(20_000)}`, /headers are over/],
      ["no boundary at all", /no boundary "x"/],
    ];
    for (const [text, message] of cases) {
      await expect(parse(piecewise(enc.encode(text), 1024), "x"), text.slice(0, 30)).rejects.toThrow(MultipartSyntaxError);
      await expect(parse(piecewise(enc.encode(text), 1024), "x")).rejects.toThrow(message);
    }
  });

  it("finds the boundary of a Content-Type, quoted or not, and none in another type", () => {
    expect(multipartBoundary("multipart/form-data; boundary=abc")).toBe("abc");
    expect(multipartBoundary('multipart/form-data; charset=utf-8; boundary="a b:c"')).toBe("a b:c");
    expect(multipartBoundary("multipart/form-data")).toBeUndefined();
    expect(multipartBoundary("application/json; boundary=abc")).toBeUndefined();
    expect(multipartBoundary(`multipart/form-data; boundary=${"x".repeat(71)}`)).toBeUndefined();
  });
});
