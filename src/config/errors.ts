import { DeerflowError } from "../core/errors.ts";

export type ConfigErrorCode =
  /** The file is not valid YAML (or JSON). */
  | "config_not_yaml"
  /** The file parsed, but a value is missing, has the wrong type, or a key is unknown. */
  | "config_invalid"
  /** The file that was asked for does not exist. */
  | "config_not_found";

/** One problem in a config file: `path` is the key path (`models[0].use`), empty for the root. */
export interface ConfigIssue {
  readonly path: string;
  readonly message: string;
}

/**
 * A config file that cannot be used. The message is one line that names the file, the key path and
 * what was expected there, so it can be shown to the user as is.
 */
export class ConfigError extends DeerflowError {
  override readonly name = "ConfigError";
  declare readonly code: ConfigErrorCode;
  readonly fileName: string;
  /** Every problem found, in document order; the message shows the first. */
  readonly issues: readonly ConfigIssue[];

  constructor(code: ConfigErrorCode, fileName: string, issues: readonly ConfigIssue[], options?: { cause?: unknown }) {
    super(code, formatConfigMessage(fileName, issues), options);
    this.fileName = fileName;
    this.issues = issues;
  }
}

export function formatIssueLine(fileName: string, issue: ConfigIssue): string {
  return issue.path === "" ? `${fileName}: ${issue.message}` : `${fileName}: ${issue.path}: ${issue.message}`;
}

function formatConfigMessage(fileName: string, issues: readonly ConfigIssue[]): string {
  const first = issues[0];
  if (first === undefined) return `${fileName}: invalid configuration`;
  const line = formatIssueLine(fileName, first);
  const more = issues.length - 1;
  if (more === 0) return line;
  return `${line} (and ${more} more problem${more === 1 ? "" : "s"})`;
}
