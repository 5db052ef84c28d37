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

/** What the server knows about the connection a request came in on. */
export interface ConnectionInfo {
  /** The peer's IP address as the socket reports it (`127.0.0.1`, `::1`, `::ffff:10.0.0.5`); absent when unknown. */
  readonly remoteAddress?: string;
}

/** Called once per request; the adapter passes the connection's info as the second argument. */
export type FetchHandler = (request: Request, info?: ConnectionInfo) => Response | Promise<Response>;

/** Serves a Web fetch handler on the runtime's own HTTP server; each adapter under adapters/ implements it. */
export type ServeFetch = (fetch: FetchHandler, options: ServeOptions) => Promise<HttpServerHandle>;
