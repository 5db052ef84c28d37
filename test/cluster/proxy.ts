// The load balancer in front of the cluster's workers: node:http, round-robin over the workers
// that are up. A request carrying `x-deerflow-worker: <index>` goes to that worker only (503 when
// it is down). A worker that refuses the connection is skipped and the request tried on the next
// one (request bodies are buffered for that; they are small). Responses pass through chunk by
// chunk as they arrive, so an SSE stream is never held back; `x-deerflow-served-by` says which
// worker answered.
import { Agent, createServer, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import { listenLoopback } from "./loopback.ts";

export const PIN_HEADER = "x-deerflow-worker";
export const SERVED_BY_HEADER = "x-deerflow-served-by";

export interface ProxyTarget {
  /** http://127.0.0.1:<port> of the worker, or undefined while it has none (not started, gone). */
  readonly url: string | undefined;
  /** False: skipped (a worker stopped or known dead, whose socket may still accept). */
  readonly up: boolean;
}

export interface ClusterProxy {
  readonly url: string;
  /** Requests each worker answered, by index. */
  served(): number[];
  close(): Promise<void>;
}

// Hop-by-hop headers (RFC 9110) are the proxy's own, never forwarded.
const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"]);

function forwardable(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
  return out;
}

function isRefused(error: unknown): boolean {
  const code = (error as { code?: string } | undefined)?.code;
  return code === "ECONNREFUSED" || code === "ECONNRESET" || code === "EPIPE";
}

/** `targets()` is read per request, so workers may be added, stopped or replaced while it runs. */
export async function startProxy(targets: () => readonly ProxyTarget[]): Promise<ClusterProxy> {
  const agent = new Agent({ keepAlive: true, maxSockets: 256 });
  const served: number[] = [];
  let next = 0;

  const order = (pin: string | undefined): number[] | string => {
    const all = targets();
    if (pin !== undefined) {
      const index = Number(pin);
      if (!Number.isInteger(index) || index < 0 || index >= all.length) return `${PIN_HEADER}: ${pin} names no worker (0..${all.length - 1})`;
      return all[index]!.up && all[index]!.url !== undefined ? [index] : `worker ${index} is down`;
    }
    const start = next++;
    const up: number[] = [];
    for (let k = 0; k < all.length; k++) {
      const index = (start + k) % all.length;
      if (all[index]!.up && all[index]!.url !== undefined) up.push(index);
    }
    return up.length > 0 ? up : "no worker is up";
  };

  const attempt = (index: number, req: IncomingMessage, body: Buffer, res: ServerResponse): Promise<"done" | "refused"> =>
    new Promise((resolve) => {
      const target = new URL(req.url ?? "/", targets()[index]!.url);
      const headers = forwardable(req.headers);
      delete headers[PIN_HEADER];
      headers["content-length"] = String(body.length);
      const upstream = httpRequest(target, { method: req.method, headers, agent }, (answer) => {
        served[index] = (served[index] ?? 0) + 1;
        res.writeHead(answer.statusCode ?? 502, { ...forwardable(answer.headers), [SERVED_BY_HEADER]: String(index) });
        // Headers out now: an SSE client sees the stream open before the first frame.
        res.flushHeaders();
        answer.on("data", (chunk: Buffer) => res.write(chunk));
        answer.on("end", () => {
          res.end();
          resolve("done");
        });
        answer.on("error", () => {
          res.destroy();
          resolve("done");
        });
      });
      let answered = false;
      upstream.on("response", () => (answered = true));
      upstream.on("error", (error) => {
        if (!answered && isRefused(error) && !res.headersSent) resolve("refused");
        else {
          res.destroy();
          resolve("done");
        }
      });
      // The client went away (an aborted stream): so does the upstream request.
      res.on("close", () => {
        if (!res.writableFinished) upstream.destroy();
      });
      upstream.end(body);
    });

  const server = createServer(async (req, res) => {
    res.socket?.setNoDelay(true);
    const parts: Buffer[] = [];
    for await (const part of req) parts.push(part as Buffer);
    const body = Buffer.concat(parts);
    const pin = req.headers[PIN_HEADER];
    const candidates = order(Array.isArray(pin) ? pin[0] : pin);
    if (typeof candidates === "string") {
      res.writeHead(503, { "content-type": "application/json" }).end(JSON.stringify({ detail: `cluster proxy: ${candidates}` }));
      return;
    }
    for (const index of candidates) {
      if ((await attempt(index, req, body, res)) === "done") return;
    }
    res.writeHead(503, { "content-type": "application/json" }).end(JSON.stringify({ detail: `cluster proxy: workers ${candidates.join(", ")} refused the connection` }));
  });
  const listening = await listenLoopback(server);
  return {
    url: listening.url,
    served: () => [...served],
    async close() {
      await listening.close();
      agent.destroy();
    },
  };
}
