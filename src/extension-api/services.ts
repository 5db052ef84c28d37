import type { HostPolicySnapshot } from "./policy.ts";
import type { ExtensionRouteContext } from "./principal.ts";
import type { ExtensionData } from "./task-store.ts";

/** What a key of a session holds now: its text and a version token (both null when it holds nothing). */
export interface ExtensionRecord {
  readonly value: string | null;
  /** Opaque; pass it back to `write` unchanged. */
  readonly version: string | null;
}

/**
 * A service's access to the host's persistence engine (the gateway's own store: fs, PostgreSQL,
 * Deno KV), confined to one namespace. Writes are compare-and-set, so several gateway processes
 * over one store never silently overwrite each other's records.
 */
export interface ExtensionSession {
  readonly namespace: string;
  read(key: string): Promise<ExtensionRecord>;
  /**
   * Writes `value` (null deletes) only if the key's version is still `expected` (null: the key must
   * hold nothing). Returns false, writing nothing, when another writer got there first: read again.
   */
  write(key: string, value: string | null, expected: string | null): Promise<boolean>;
}

/**
 * Opens a session on the host's persistence. The namespace (letters, digits, `_`, `.`, `-`; an
 * extension's own name, say) keeps its keys apart from the host's and from other namespaces'.
 */
export type ExtensionSessionFactory = (namespace: string) => ExtensionSession;

/** What the host hands every service at start: one frozen snapshot, the same object for each. */
export interface ExtensionRuntimeDeps {
  readonly appStore: ExtensionData;
  readonly policy: HostPolicySnapshot;
  /** Ready before the first service starts; usable until the last one stopped. */
  readonly sessionFactory: ExtensionSessionFactory;
}

/**
 * Something that lives as long as the gateway: started once after the host's stores are ready,
 * stopped in reverse order at shutdown. A start that fails is reported and the gateway serves
 * without it; stop is still called, so stop must cope with a partial start.
 */
export interface ExtensionService {
  readonly name: string;
  start(deps: ExtensionRuntimeDeps): Promise<void>;
  stop(): Promise<void>;
}

export type ExtensionRouteMethod = "GET" | "POST" | "PUT" | "PATCH" | "DELETE" | "HEAD" | "OPTIONS";

export const EXTENSION_ROUTE_METHODS: readonly ExtensionRouteMethod[] = Object.freeze([
  "GET",
  "POST",
  "PUT",
  "PATCH",
  "DELETE",
  "HEAD",
  "OPTIONS",
]);

/**
 * One HTTP route, as plain data with Web Request/Response, so an extension needs no web framework.
 * Contributed routes sit behind the host's session auth and CSRF checks and cannot opt out.
 */
export interface ExtensionRoute {
  readonly method: ExtensionRouteMethod;
  /** A path template such as `/api/ext/audit/{id}`; the host decides what else it may not shadow. */
  readonly path: string;
  handler(request: Request, ctx: ExtensionRouteContext): Response | Promise<Response>;
}
