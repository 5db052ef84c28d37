// HTTP/1.1 over a plain TCP socket (node:net, on Node, Deno and Bun alike), for requests no fetch
// client sends the same way everywhere: a body streamed chunk by chunk at the test's pace, whose
// response is read as soon as it arrives while the body is still going out.
import { connect, type Socket } from "node:net";

export interface RawResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

export interface StreamedRequestOptions {
  readonly method: string;
  readonly path: string;
  readonly headers?: Readonly<Record<string, string>>;
  /** Body bytes the client means to send in all (it stops early once a response arrived). */
  readonly totalBytes: number;
  /** Bytes sent before the body waits for `release()`. */
  readonly firstBytes: number;
  readonly chunkBytes?: number;
  /** Declare the whole size in Content-Length instead of sending the body chunked. */
  readonly declareLength?: boolean;
  /** Pace of the body after its first part; default: as fast as the socket takes it. */
  readonly bytesPerSecond?: number;
}

export interface StreamedRequest {
  /** The response, as soon as it is complete (the body may still be on its way). */
  readonly response: Promise<RawResponse>;
  /** Resolves once `firstBytes` of the body are written. */
  readonly firstPartSent: Promise<void>;
  /** Lets the body go on past its first part. */
  release(): void;
  /** Body bytes written so far. */
  sent(): number;
  /** True once the whole body was written. */
  finished(): boolean;
  /** True once the response arrived. */
  answered(): boolean;
  close(): void;
}

const CRLF = "\r\n";
const HEAD_END = Buffer.from("\r\n\r\n");

/** Status, headers and body, once `data` holds a whole response; undefined until then. */
function parseResponse(data: Buffer, closed: boolean): RawResponse | undefined {
  const headEnd = data.indexOf(HEAD_END);
  if (headEnd < 0) return undefined;
  const [statusLine = "", ...lines] = data.subarray(0, headEnd).toString("latin1").split(CRLF);
  const status = Number(statusLine.split(" ")[1]);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(":");
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const rest = data.subarray(headEnd + HEAD_END.length);
  if (headers["content-length"] !== undefined) {
    const length = Number(headers["content-length"]);
    return rest.length >= length ? { status, headers, body: rest.subarray(0, length).toString("utf8") } : undefined;
  }
  if (/chunked/i.test(headers["transfer-encoding"] ?? "")) {
    const parts: Buffer[] = [];
    let at = 0;
    for (;;) {
      const lineEnd = rest.indexOf(CRLF, at);
      if (lineEnd < 0) return undefined;
      const size = parseInt(rest.subarray(at, lineEnd).toString("latin1"), 16);
      if (size === 0) return { status, headers, body: Buffer.concat(parts).toString("utf8") };
      if (rest.length < lineEnd + 2 + size + 2) return undefined;
      parts.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size));
      at = lineEnd + 2 + size + 2;
    }
  }
  return closed ? { status, headers, body: rest.toString("utf8") } : undefined;
}

function writeAll(socket: Socket, data: Uint8Array | string): Promise<void> {
  return new Promise((resolve, reject) => {
    socket.write(data, (error) => (error ? reject(error) : resolve()));
  });
}

/**
 * Sends `method path` to `baseUrl` with a body of `totalBytes` bytes of "x": `firstBytes` of it,
 * then (after `release()`) the rest as fast as the socket takes it, until the response arrives.
 */
export function streamedRequest(baseUrl: string, options: StreamedRequestOptions): StreamedRequest {
  const url = new URL(baseUrl);
  const socket = connect({ host: url.hostname, port: Number(url.port) });
  const chunkBytes = options.chunkBytes ?? 64 * 1024;
  let sent = 0;
  let done = false;
  let answered = false;
  let released!: () => void;
  const releasedGate = new Promise<void>((resolve) => (released = resolve));
  let firstSent!: () => void;
  const firstPartSent = new Promise<void>((resolve) => (firstSent = resolve));

  const response = new Promise<RawResponse>((resolve, reject) => {
    let data = Buffer.alloc(0);
    const settle = (closed: boolean) => {
      const parsed = answered ? undefined : parseResponse(data, closed);
      if (parsed) {
        answered = true;
        resolve(parsed);
      } else if (closed && !answered) {
        reject(new Error(`The connection closed before a whole response arrived (${sent} body bytes sent).`));
      }
    };
    socket.on("data", (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      settle(false);
    });
    socket.on("close", () => settle(true));
    // A server that answered early may reset the connection while the body is still going out.
    socket.on("error", () => undefined);
  });

  void (async () => {
    await new Promise<void>((resolve, reject) => {
      socket.once("connect", resolve);
      socket.once("error", reject);
    });
    const head = [
      `${options.method} ${options.path} HTTP/1.1`,
      `Host: ${url.host}`,
      ...Object.entries(options.headers ?? {}).map(([name, value]) => `${name}: ${value}`),
      options.declareLength ? `Content-Length: ${options.totalBytes}` : "Transfer-Encoding: chunked",
      "",
      "",
    ].join(CRLF);
    await writeAll(socket, head);
    const chunk = Buffer.alloc(chunkBytes, "x");
    const frame = (bytes: Buffer) => (options.declareLength ? bytes : Buffer.concat([Buffer.from(`${bytes.length.toString(16)}${CRLF}`), bytes, Buffer.from(CRLF)]));
    while (sent < options.totalBytes && !answered && !socket.destroyed) {
      if (sent >= options.firstBytes) await releasedGate;
      if (answered || socket.destroyed) break;
      const limit = sent < options.firstBytes ? options.firstBytes : options.totalBytes;
      const size = Math.min(chunkBytes, limit - sent);
      await writeAll(socket, frame(chunk.subarray(0, size)));
      sent += size;
      if (options.bytesPerSecond && sent > options.firstBytes) await new Promise((resolve) => setTimeout(resolve, (size / options.bytesPerSecond!) * 1000));
      if (sent >= options.firstBytes) firstSent();
    }
    if (sent >= options.totalBytes && !options.declareLength) await writeAll(socket, `0${CRLF}${CRLF}`);
    done = sent >= options.totalBytes;
  })().catch(() => {
    // The server closed the connection on an answered (or refused) body: nothing more to send.
    firstSent();
  });

  return {
    response,
    firstPartSent,
    release: () => released(),
    sent: () => sent,
    finished: () => done,
    answered: () => answered,
    close: () => socket.destroy(),
  };
}

export interface FloodAnswer {
  readonly status: number;
  readonly body: string;
}

/**
 * Keeps `concurrency` requests made by `request` in flight back to back until `stop()`, so a check
 * made meanwhile happens while hostile requests are being served. `stop()` waits for those in
 * flight and returns every answer.
 */
export function flood(request: (n: number) => Promise<Response>, concurrency: number): { readonly firstAnswered: Promise<void>; answered(): number; stop(): Promise<FloodAnswer[]> } {
  let stopped = false;
  let started = 0;
  const answers: FloodAnswer[] = [];
  let firstAnswered!: () => void;
  const first = new Promise<void>((resolve) => (firstAnswered = resolve));
  const lanes = Array.from({ length: concurrency }, async () => {
    while (!stopped) {
      const response = await request(started++);
      answers.push({ status: response.status, body: await response.text() });
      firstAnswered();
    }
  });
  return {
    firstAnswered: first,
    answered: () => answers.length,
    stop: async () => {
      stopped = true;
      await Promise.all(lanes);
      return answers;
    },
  };
}
