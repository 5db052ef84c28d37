import { DeerflowError } from "../core/errors.ts";
import type { McpServerSettings } from "./config.ts";
import { openMcpSession, type McpClientDeps, type McpSession } from "./client.ts";

/*
 * Stateful servers (a browser, a REPL) keep state in their session, so consecutive calls from one
 * thread must reach the same session, and two users whose thread ids collide must not share one.
 * Sessions are therefore kept per (server, user:thread), opened on first use, and evicted least
 * recently used beyond a bound so a long-lived process cannot accumulate processes or connections.
 */

export const DEFAULT_MAX_MCP_SESSIONS = 256;

interface Entry {
  readonly session: McpSession;
}

export class McpSessionPool {
  readonly #deps: McpClientDeps;
  readonly #max: number;
  readonly #entries = new Map<string, Entry>();
  readonly #opening = new Map<string, Promise<McpSession>>();
  #closed = false;

  constructor(deps: McpClientDeps = {}, maxSessions: number = DEFAULT_MAX_MCP_SESSIONS) {
    this.#deps = deps;
    this.#max = Math.max(1, Math.floor(maxSessions));
  }

  /** Live sessions, for tests and diagnostics. */
  get size(): number {
    return this.#entries.size;
  }

  /**
   * The session of this server and scope: the pooled one while its transport is open, else a new
   * one. Concurrent first calls share one opening instead of starting duplicate processes.
   */
  async get(server: McpServerSettings, scope: string, signal?: AbortSignal): Promise<McpSession> {
    if (this.#closed) throw closedError();
    const key = `${server.name}\u0000${scope}`;
    const entry = this.#entries.get(key);
    if (entry?.session.open) {
      this.#entries.delete(key);
      this.#entries.set(key, entry);
      return entry.session;
    }
    if (entry) this.#entries.delete(key);
    const pending = this.#opening.get(key);
    if (pending) return signal ? raceAbort(pending, signal) : pending;
    // The opening is shared and pools its session itself, so one caller's abort neither fails the
    // others' wait nor leaks the session it started.
    const opening = openMcpSession(server, this.#deps)
      .then(async (session) => {
        if (this.#closed) {
          await session.close();
          throw closedError();
        }
        this.#entries.set(key, { session });
        this.#evict();
        return session;
      })
      .finally(() => this.#opening.delete(key));
    this.#opening.set(key, opening);
    return signal ? raceAbort(opening, signal) : opening;
  }

  /** Drops a session whose connection failed, so the next call opens a fresh one. */
  async discard(server: string, scope: string, session: McpSession): Promise<void> {
    const key = `${server}\u0000${scope}`;
    if (this.#entries.get(key)?.session === session) this.#entries.delete(key);
    await session.close();
  }

  async close(): Promise<void> {
    this.#closed = true;
    const sessions = [...this.#entries.values()].map((entry) => entry.session);
    this.#entries.clear();
    const opening = [...this.#opening.values()];
    await Promise.all([
      ...sessions.map((session) => session.close()),
      ...opening.map((p) => p.then((session) => session.close(), () => undefined)),
    ]);
  }

  #evict(): void {
    while (this.#entries.size > this.#max) {
      const [oldestKey, oldest] = this.#entries.entries().next().value as [string, Entry];
      this.#entries.delete(oldestKey);
      void oldest.session.close();
    }
  }
}

function closedError(): DeerflowError {
  return new DeerflowError("mcp_toolset_closed", "The MCP toolset was closed; load the MCP tools again (loadMcpTools) to call its tools.");
}

function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}
