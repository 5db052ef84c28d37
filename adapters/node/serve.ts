import { serve } from "@hono/node-server";
import type { AddressInfo } from "node:net";
import type { ServeFetch } from "../../src/ports/http-server.ts";
import { serverUrl } from "../shared/server-url.ts";

/** Node: @hono/node-server, which turns Node's req/res into Web Request/Response. */
export const serveNode: ServeFetch = (fetch, options) =>
  new Promise((resolve, reject) => {
    const server = serve({ fetch, hostname: options.hostname, port: options.port }, (info: AddressInfo) => {
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
