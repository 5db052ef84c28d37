import { DeerflowError } from "../../../src/core/errors.ts";
import { StorageUnavailableError } from "../../../src/ports/key-value.ts";

/** Refusals at start that a restart does not fix: a server too old, a schema newer than this build. */
export class PostgresStorageError extends DeerflowError {
  declare readonly code: "postgres_version_unsupported" | "schema_version_newer" | "database_url_missing" | "postgres_unreachable";
  constructor(code: PostgresStorageError["code"], message: string, options?: { cause?: unknown }) {
    super(code, message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "PostgresStorageError";
  }
}

/** Where a URL points, for messages: host:port and database, never the user's password. */
export function describeServer(url: string): string {
  try {
    const parsed = new URL(url);
    const host = parsed.hostname || "localhost";
    const port = parsed.port || "5432";
    const database = decodeURIComponent(parsed.pathname.replace(/^\//, "")) || parsed.username || "postgres";
    return `${host}:${port} (database ${database})`;
  } catch {
    return "the server in the connection URL";
  }
}

/** Node's socket errors that mean "the server is not there (now)". */
const NETWORK_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "ENOTFOUND", "EHOSTUNREACH", "ENETUNREACH", "EAI_AGAIN", "ECONNABORTED"]);
/** SQLSTATEs of a server shutting down, starting, or out of connections: retryable, not the request's fault. */
const UNAVAILABLE_STATES = new Set(["57P01", "57P02", "57P03", "53300", "53000"]);
/** pg's own words for a connection that died under it (it sets no code on these). */
const TERMINATED = /Connection terminated|connection timeout|timeout exceeded when trying to connect|Client has encountered a connection error|not queryable|Connection ended/i;

/** Whether `error` says the database cannot be reached (as opposed to a bad query). */
export function isConnectionFailure(error: unknown): boolean {
  if (error instanceof StorageUnavailableError) return true;
  if (typeof error !== "object" || error === null) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string" && (NETWORK_CODES.has(code) || UNAVAILABLE_STATES.has(code) || code.startsWith("08"))) return true;
  const message = (error as { message?: unknown }).message;
  return typeof message === "string" && TERMINATED.test(message);
}

/** A connection failure as StorageUnavailableError (naming the server, never the password); anything else unchanged. */
export function toStorageError(error: unknown, server: string, secret?: string): unknown {
  if (error instanceof StorageUnavailableError || !isConnectionFailure(error)) return error;
  return new StorageUnavailableError(
    `PostgreSQL at ${server} cannot be reached (${redact(reasonOf(error), secret)}); nothing was written, retry once the database is back.`,
    { cause: error },
  );
}

export function reasonOf(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const code = (error as { code?: unknown }).code;
  return message || (typeof code === "string" ? code : "unknown error");
}

/** A password never reaches a message, even where a driver quotes what it was given. */
export function redact(text: string, secret: string | undefined): string {
  return secret ? text.split(secret).join("***") : text;
}

/** The URL's password (to keep it out of messages); undefined when it has none. */
export function passwordOf(url: string): string | undefined {
  try {
    return decodeURIComponent(new URL(url).password) || undefined;
  } catch {
    return undefined;
  }
}
