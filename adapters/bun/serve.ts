import type { ServeFetch } from "../../src/ports/http-server.ts";
import { serverUrl } from "../shared/server-url.ts";

declare const Bun: {
  serve(options: {
    hostname: string;
    port: number;
    idleTimeout: number;
    maxRequestBodySize: number;
    fetch: (request: Request, server: BunServer) => Response | Promise<Response>;
  }): BunServer;
};

interface BunServer {
  readonly port: number;
  stop(closeActiveConnections?: boolean): Promise<void> | void;
  /** The peer of the connection `request` came in on; null for a request Bun did not receive on a socket. */
  requestIP(request: Request): { address: string } | null;
}

/**
 * Bun: Bun.serve. Its default idleTimeout (10 s) cuts a quiet SSE stream (docs/toolchain.md,
 * Bun's idle timeout); the gateway's heartbeat comes every 15 s, so the idle timeout is off. Its own body cap (128 MB,
 * answered with an empty 413) is lifted: the gateway caps every body per route while it streams
 * and names the limit (gateway.limits, gateway.uploads). The peer address is
 * `server.requestIP(request)`.
 */
export const serveBun: ServeFetch = async (fetch, options) => {
  const server = Bun.serve({
    hostname: options.hostname,
    port: options.port,
    idleTimeout: 0,
    maxRequestBodySize: Number.MAX_SAFE_INTEGER,
    fetch: (request, bun) => {
      const remoteAddress = bun.requestIP(request)?.address;
      return fetch(request, remoteAddress === undefined ? {} : { remoteAddress });
    },
  });
  return {
    url: serverUrl(options.hostname, server.port),
    hostname: options.hostname,
    port: server.port,
    close: async () => {
      await server.stop(true);
    },
  };
};
