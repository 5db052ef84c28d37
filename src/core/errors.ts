/**
 * The base of every error deerflow-edge raises on purpose: a stable `code` a program can switch on,
 * and a message that tells a person what to do next.
 */
export class DeerflowError extends Error {
  readonly code: string;
  readonly details?: Readonly<Record<string, unknown>>;

  constructor(code: string, message: string, options?: { cause?: unknown; details?: Record<string, unknown> }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "DeerflowError";
    this.code = code;
    if (options?.details) this.details = Object.freeze({ ...options.details });
  }
}

export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  return typeof error === "string" ? error : JSON.stringify(error) ?? String(error);
}

/** The aborted-run error, recognisable across runtimes whose AbortError classes differ. */
export function isAbortError(error: unknown): boolean {
  return error instanceof Error && (error.name === "AbortError" || /abort/i.test(error.name));
}
