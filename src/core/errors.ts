/** The root of every error deerflow-edge raises on purpose; defined on the extension API's floor. */
export { DeerflowError } from "../extension-api/errors.ts";

export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  return typeof error === "string" ? error : JSON.stringify(error) ?? String(error);
}

/** The aborted-run error, recognisable across runtimes whose AbortError classes differ. */
export function isAbortError(error: unknown): boolean {
  return error instanceof Error && (error.name === "AbortError" || /abort/i.test(error.name));
}
