import { DeerflowError } from "../../core/errors.ts";

/** Every way an extension-manager operation stops; a program switches on the code, a person reads the message. */
export type ExtensionManagerErrorCode =
  /** install without --yes (or a declined prompt): extension code runs with the gateway's rights. */
  | "extension_not_confirmed"
  /** The SOURCE argument is not an installable source (see validateExtensionSource). */
  | "extension_source_rejected"
  /** A local folder cannot be snapshotted: a link, a special file, a likely credential file. */
  | "extension_snapshot_rejected"
  /** extensions/sources/<package> already exists: that package is installed. */
  | "extension_snapshot_exists"
  /** The package does not declare exactly one valid extension entry in its package.json. */
  | "extension_package_invalid"
  /** config.yaml is missing, is not YAML, or has a plugins block this manager cannot manage. */
  | "extension_config_invalid"
  /** npm could not be started, or is older than the manager relies on. */
  | "extension_npm_unsupported"
  /** An npm command failed. */
  | "extension_npm_failed"
  /** The new lock records a local reference a clean install elsewhere could not reproduce. */
  | "extension_lock_not_reproducible"
  /** The installed entry does not load, or its export is not an install function. */
  | "extension_entry_unloadable"
  /** NAME matches no record, or more than one. */
  | "extension_not_found"
  /** The new record would clash with another record's name, package or entry. */
  | "extension_conflict"
  /** Someone else changed the manifest, lock or config during the operation; their edit was kept. */
  | "extension_concurrent_edit"
  /** The operation failed and the environment could not be put back in step with the restored lock. */
  | "extension_recovery_failed"
  /** Ctrl-C: files were restored, the environment sync was skipped. */
  | "extension_interrupted";

export class ExtensionManagerError extends DeerflowError {
  declare readonly code: ExtensionManagerErrorCode;

  constructor(code: ExtensionManagerErrorCode, message: string, options?: { cause?: unknown; details?: Record<string, unknown> }) {
    super(code, message, options);
    this.name = "ExtensionManagerError";
  }
}
