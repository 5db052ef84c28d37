/** A running HTTP server the runtime adapter started for a fetch handler. */
export interface HttpServerHandle {
  /** Where it listens, e.g. `http://127.0.0.1:2026`. */
  readonly url: string;
  readonly hostname: string;
  readonly port: number;
  /** Stops accepting connections and closes the open ones. */
  close(): Promise<void>;
}

export interface ServeOptions {
  readonly hostname: string;
  /** 0 picks a free port. */
  readonly port: number;
}

export type FetchHandler = (request: Request) => Response | Promise<Response>;

/** Serves a Web fetch handler on the runtime's own HTTP server; each adapter under adapters/ implements it. */
export type ServeFetch = (fetch: FetchHandler, options: ServeOptions) => Promise<HttpServerHandle>;
