/**
 * The root of every error deerflow-edge raises on purpose: a stable `code` a program can switch on,
 * and a message that tells a person what to do next. It lives here, on the lowest floor, so the
 * extension contract's own errors share it; the rest of src/ imports it through core/errors.ts.
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

/**
 * The one error shape of the extension API. Callers branch on `code`, which never changes between
 * releases; `message` is for people and says what to do next.
 */
export class ExtensionApiError extends DeerflowError {
  constructor(code: string, message: string) {
    super(code, message);
    this.name = new.target.name;
  }
}
