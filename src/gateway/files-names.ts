import { DeerflowError } from "../core/errors.ts";
import { VIRTUAL_DIRS } from "../ports/sandbox.ts";
import { fileSuffix, isUploadStagingFile } from "../sandbox/upload-names.ts";

/**
 * Names and URLs of a thread's files: which upload names are accepted, how duplicates are renamed,
 * and the virtual paths and artifact URLs the gateway hands back.
 */

/** File names are stored as they are; the usual file system limit keeps them portable. */
export const MAX_FILE_NAME_BYTES = 255;

/** An upload name the gateway will not store; the message names the file and says what to change. */
export class FileNameError extends DeerflowError {
  declare readonly code: "invalid_file_name";

  constructor(message: string) {
    super("invalid_file_name", message);
    this.name = "FileNameError";
  }
}

const utf8 = new TextEncoder();

function shown(name: string): string {
  return JSON.stringify(name);
}

/**
 * Checks a name that must already be bare (DELETE's path segment, a renamed duplicate). Control
 * characters are refused as well as NUL: a name is echoed into the model's context and into
 * headers, where a line break could pass for something else.
 */
export function assertBareFileName(name: string): string {
  if (name === "") throw new FileNameError("A file has an empty name. Give every file a name.");
  if (name === "." || name === "..") throw new FileNameError(`File name ${shown(name)} is not a file name. Rename the file.`);
  if (name.includes("/")) throw new FileNameError(`File name ${shown(name)} contains "/". Use the file's own name without folders.`);
  if (name.includes("\\")) throw new FileNameError(`File name ${shown(name)} contains a backslash. Rename the file without "\\".`);
  if (name.includes("\0")) throw new FileNameError(`File name ${shown(name.replaceAll("\0", "\\0"))} contains a NUL byte. Rename the file.`);
  if (/[\u0001-\u001f\u007f]/.test(name)) throw new FileNameError(`File name ${shown(name)} contains a control character. Rename the file.`);
  const bytes = utf8.encode(name).length;
  if (bytes > MAX_FILE_NAME_BYTES) {
    throw new FileNameError(
      `File name ${shown(name)} is ${bytes} bytes long in UTF-8; the limit is ${MAX_FILE_NAME_BYTES}. Shorten the name.`,
    );
  }
  if (isUploadStagingFile(name)) {
    throw new FileNameError(`File name ${shown(name)} is reserved for uploads in progress. Rename the file.`);
  }
  return name;
}

/**
 * The name an uploaded file is stored under: browsers and scripts may send a path, of which only
 * the last component is kept (trailing slashes dropped first, as pathlib does); the rest must pass
 * assertBareFileName.
 */
export function uploadFileName(raw: string): string {
  const trimmed = raw.replace(/\/+$/, "");
  const base = trimmed.slice(trimmed.lastIndexOf("/") + 1);
  if (base === "" && raw !== "") throw new FileNameError(`File name ${shown(raw)} has no file name part. Rename the file.`);
  return assertBareFileName(base);
}

/**
 * Returns `name`, or `stem_1.ext`, `stem_2.ext` ... when a file of this request already took it,
 * and records the result in `taken`. Files already in the folder are replaced, as upstream does:
 * uploading a file again updates it.
 */
export function claimUniqueFileName(name: string, taken: Set<string>): string {
  let candidate = name;
  if (taken.has(candidate)) {
    const suffix = fileSuffix(name);
    const stem = name.slice(0, name.length - suffix.length);
    let n = 1;
    do candidate = `${stem}_${n++}${suffix}`;
    while (taken.has(candidate));
    assertBareFileName(candidate);
  }
  taken.add(candidate);
  return candidate;
}

export function uploadVirtualPath(name: string): string {
  return `${VIRTUAL_DIRS.uploads}/${name}`;
}

/** Python's quote(safe=""): encodeURIComponent also escapes these, so both sides build one URL. */
export function quotePathSegment(segment: string): string {
  return encodeURIComponent(segment).replace(/[!'()*]/g, (ch) => `%${ch.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** `/api/threads/<id>/artifacts/mnt/user-data/...`, each path segment percent-encoded. */
export function artifactUrl(threadId: string, virtualPath: string): string {
  const encoded = virtualPath.split("/").map(quotePathSegment).join("/");
  return `/api/threads/${threadId}/artifacts${encoded}`;
}
