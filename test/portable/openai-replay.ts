// A node:http server on 127.0.0.1 that replays recorded chat-completions traffic (test/fixtures/
// openai/ and its like): each request is answered by the first fixture whose `match` fits it,
// with the recorded status, headers and body or SSE events. Runs under Node, Deno and Bun.
import { readdirSync, readFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export interface FixtureMatch {
  stream?: boolean;
  tools?: boolean;
  last_role?: string;
  last_content_includes?: string;
  authorization?: string;
}

export interface Fixture {
  file: string;
  description: string;
  match: FixtureMatch;
  delay_ms?: number;
  write_chunk_bytes?: number;
  response: { status: number; headers: Record<string, string>; body?: unknown; sse?: unknown[] };
}

export interface ReceivedRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: Record<string, any>;
  fixture: string | undefined;
  /** The client went away before the response was complete. */
  closedEarly: boolean;
}

/** Recorded chat-completions traffic of the provider, one exchange per file. */
export const OPENAI_FIXTURES = new URL("../fixtures/openai/", import.meta.url);

/** The fixtures of a folder (default: test/fixtures/openai/), in the order the server tries them. */
export function loadFixtures(folder: URL = OPENAI_FIXTURES): Fixture[] {
  const dir = fileURLToPath(folder);
  const fixtures = readdirSync(dir)
    .filter((file) => file.endsWith(".json"))
    .sort()
    .map((file) => ({ file, ...(JSON.parse(readFileSync(join(dir, file), "utf8")) as Omit<Fixture, "file">) }));
  // A fixture keyed on the credentials wins over one keyed on content only.
  return [...fixtures.filter((f) => f.match.authorization), ...fixtures.filter((f) => !f.match.authorization)];
}

function matches(match: FixtureMatch, body: Record<string, any>, headers: IncomingHttpHeaders): boolean {
  const last = Array.isArray(body.messages) ? body.messages.at(-1) : undefined;
  if (match.stream !== undefined && (body.stream === true) !== match.stream) return false;
  if (match.tools !== undefined && (Array.isArray(body.tools) && body.tools.length > 0) !== match.tools) return false;
  if (match.last_role !== undefined && last?.role !== match.last_role) return false;
  if (
    match.last_content_includes !== undefined &&
    !(typeof last?.content === "string" && last.content.includes(match.last_content_includes))
  ) {
    return false;
  }
  if (match.authorization !== undefined && headers.authorization !== match.authorization) return false;
  return true;
}

export interface ReplayServer {
  baseUrl: string;
  received: ReceivedRequest[];
  close(): Promise<void>;
}

export function startReplayServer(fixtures: Fixture[]): Promise<ReplayServer> {
  const received: ReceivedRequest[] = [];
  const server: Server = createServer((req, res) => {
    const parts: Uint8Array[] = [];
    req.on("data", (part: Uint8Array) => parts.push(part));
    req.on("end", () => {
      const text = new TextDecoder().decode(concatBytes(parts));
      const body = (text === "" ? {} : JSON.parse(text)) as Record<string, any>;
      const fixture = fixtures.find((f) => matches(f.match, body, req.headers));
      const record: ReceivedRequest = {
        method: req.method ?? "",
        url: req.url ?? "",
        headers: req.headers,
        body,
        fixture: fixture?.file,
        closedEarly: false,
      };
      received.push(record);
      let finished = false;
      res.on("close", () => {
        if (!finished) record.closedEarly = true;
      });
      if (fixture === undefined) {
        finished = true;
        res.writeHead(500, { "content-type": "application/json", connection: "close" });
        res.end(JSON.stringify({ error: { message: "no recorded fixture matches this request", type: "test_error" } }));
        return;
      }
      const send = () => {
        if (res.destroyed) return;
        res.writeHead(fixture.response.status, { ...fixture.response.headers, connection: "close" });
        if (fixture.response.sse === undefined) {
          finished = true;
          res.end(JSON.stringify(fixture.response.body));
          return;
        }
        const events = fixture.response.sse.map((e) => `data: ${typeof e === "string" ? e : JSON.stringify(e)}\n\n`);
        const size = fixture.write_chunk_bytes;
        if (size === undefined) for (const event of events) res.write(event);
        else {
          const bytes = new TextEncoder().encode(events.join(""));
          for (let at = 0; at < bytes.length; at += size) res.write(bytes.subarray(at, at + size));
        }
        finished = true;
        res.end();
      };
      if (fixture.delay_ms === undefined) send();
      else {
        const timer = setTimeout(send, fixture.delay_ms);
        res.on("close", () => clearTimeout(timer));
      }
    });
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      if (address === null || typeof address === "string") return reject(new Error("no TCP address"));
      resolve({
        baseUrl: `http://127.0.0.1:${address.port}/v1`,
        received,
        close: () => new Promise<void>((done) => server.close(() => done())),
      });
    });
  });
}

function concatBytes(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}
