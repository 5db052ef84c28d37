// How files in a thread's uploads folder are named: what the Uploads middleware lists and the
// gateway's file routes serve and stage.

/** Gateway staging files (`.upload-<id>.part`) are half-written uploads, never the user's file. */
const STAGING_PREFIX = ".upload-";
const STAGING_SUFFIX = ".part";

/** Path(name).suffix: the last ".x", none for dot-files or a trailing dot. */
export function fileSuffix(name: string): string {
  const dot = name.lastIndexOf(".");
  return dot > 0 && dot < name.length - 1 ? name.slice(dot) : "";
}

export function isUploadStagingFile(name: string): boolean {
  return name.startsWith(STAGING_PREFIX) && name.endsWith(STAGING_SUFFIX);
}

/** A bare file name: no folder part and not a traversal, so it can only name a file in the uploads folder. */
export function isBareFileName(name: string): boolean {
  return name !== "" && name !== "." && name !== ".." && !/[/\\\0]/.test(name);
}
