import { DeerflowError } from "../core/errors.ts";

/*
 * Folders of the deployment itself that the gateway may add to (the skills folder). Reading goes
 * through the KeyValue mount the folder already has (`skills:` in storage); this port only
 * creates, and creates a folder whole: a reader sees the folder with every file, or no folder.
 * Implemented over the file system in adapters/shared/fs-deployment-files.ts; where there is no
 * writable file system (Deno Deploy, Workers) there is no implementation, and the gateway says so.
 */

export interface DeploymentFile {
  /** Inside the new folder, "/"-separated, already checked (no "..", no absolute path). */
  readonly path: string;
  readonly bytes: Uint8Array;
}

export interface DeploymentFiles {
  /** What the folder is, for messages: "the skills folder /srv/skills". */
  readonly description: string;
  /**
   * Creates `folder` (relative, "/"-separated) holding exactly `files`, all or nothing. False,
   * writing nothing, when the folder exists already.
   */
  createFolder(folder: string, files: readonly DeploymentFile[]): Promise<boolean>;
}

export type DeploymentFilesErrorCode = "deployment_files_invalid_path" | "deployment_files_write_failed";

export class DeploymentFilesError extends DeerflowError {
  declare readonly code: DeploymentFilesErrorCode;
  readonly status = 500;

  constructor(code: DeploymentFilesErrorCode, message: string) {
    super(code, message);
    this.name = "DeploymentFilesError";
  }
}
