/**
 * The one error shape of the extension API. Callers branch on `code`, which never changes between
 * releases; `message` is for people and says what to do next.
 */
export class ExtensionApiError extends Error {
  readonly code: string;

  constructor(code: string, message: string) {
    super(message);
    this.name = new.target.name;
    this.code = code;
  }
}
