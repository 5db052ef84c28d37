// Any Deno server of this gateway: langsmith's profile lookup must not need --allow-sys=homedir.
import "./langsmith-profile.ts";
import type { ServeFetch } from "../../src/ports/http-server.ts";
import { serverUrl } from "../shared/server-url.ts";

declare const Deno: {
  serve(
    options: { hostname: string; port: number; onListen?: (addr: { hostname: string; port: number }) => void; signal?: AbortSignal },
    handler: (request: Request, info: { remoteAddr: { hostname?: string } }) => Response | Promise<Response>,
  ): { finished: Promise<void>; shutdown(): Promise<void> };
};

/** Deno: Deno.serve, whose handler gets the peer as `info.remoteAddr`. Run Deno with --unstable-no-legacy-abort so a finished response does not look like a disconnect (docs/toolchain.md, Deno's legacy abort). */
export const serveDeno: ServeFetch = (fetch, options) =>
  new Promise((resolve, reject) => {
    try {
      const server = Deno.serve(
        {
          hostname: options.hostname,
          port: options.port,
          onListen: ({ port }) =>
            resolve({
              url: serverUrl(options.hostname, port),
              hostname: options.hostname,
              port,
              close: () => server.shutdown(),
            }),
        },
        (request, info) => {
          const remoteAddress = info?.remoteAddr?.hostname;
          return fetch(request, remoteAddress === undefined ? {} : { remoteAddress });
        },
      );
    } catch (error) {
      reject(error);
    }
  });
