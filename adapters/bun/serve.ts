import type { ServeFetch } from "../../src/ports/http-server.ts";
import { serverUrl } from "../shared/server-url.ts";

declare const Bun: {
  serve(options: {
    hostname: string;
    port: number;
    idleTimeout: number;
    fetch: (request: Request) => Response | Promise<Response>;
  }): { port: number; stop(closeActiveConnections?: boolean): Promise<void> | void };
};

/**
 * Bun: Bun.serve. Its default idleTimeout (10 s) cuts a quiet SSE stream (peers.md P19); the
 * gateway's heartbeat comes every 15 s, so the idle timeout is off.
 */
export const serveBun: ServeFetch = async (fetch, options) => {
  const server = Bun.serve({ hostname: options.hostname, port: options.port, idleTimeout: 0, fetch });
  return {
    url: serverUrl(options.hostname, server.port),
    hostname: options.hostname,
    port: server.port,
    close: async () => {
      await server.stop(true);
    },
  };
};
