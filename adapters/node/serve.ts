import { serve } from "@hono/node-server";
import type { AddressInfo } from "node:net";
import type { ServeFetch } from "../../src/ports/http-server.ts";
import { serverUrl } from "../shared/server-url.ts";

/**
 * Node: @hono/node-server, which turns Node's req/res into Web Request/Response and hands the
 * handler `{ incoming, outgoing }` as its second argument; the peer address is the incoming socket's.
 */
export const serveNode: ServeFetch = (fetch, options) =>
  new Promise((resolve, reject) => {
    const handler = (request: Request, env: { incoming?: { socket: { remoteAddress?: string | undefined } } }) => {
      const remoteAddress = env?.incoming?.socket.remoteAddress;
      return fetch(request, remoteAddress === undefined ? {} : { remoteAddress });
    };
    const server = serve({ fetch: handler, hostname: options.hostname, port: options.port }, (info: AddressInfo) => {
      server.off("error", reject);
      resolve({
        url: serverUrl(options.hostname, info.port),
        hostname: options.hostname,
        port: info.port,
        close: () =>
          new Promise<void>((done) => {
            // Open SSE streams would keep close() waiting forever; they end with the server.
            (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
            server.close(() => done());
          }),
      });
    });
    server.once("error", reject);
  });
