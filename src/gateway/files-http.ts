import { DeerflowError } from "../core/errors.ts";
import { fileSuffix } from "../sandbox/upload-names.ts";
import type { UploadBatch } from "../ports/sandbox.ts";
import { quotePathSegment } from "./files-names.ts";
import { MultipartSyntaxError, multipartBoundary, readMultipart } from "./multipart.ts";
import type { MultipartPartSink } from "./multipart.ts";

/**
 * The HTTP side of thread files: which content type an artifact is served as, when it must be
 * downloaded instead of shown, byte ranges, and streaming an upload body in without trusting its size.
 */

const TEXT = "text/plain";
const CONTENT_TYPES: Readonly<Record<string, string>> = {
  ".txt": TEXT,
  ".log": TEXT,
  ".md": "text/markdown",
  ".markdown": "text/markdown",
  ".csv": "text/csv",
  ".tsv": "text/tab-separated-values",
  ".json": "application/json",
  ".jsonl": "application/jsonl",
  ".html": "text/html",
  ".htm": "text/html",
  ".xhtml": "application/xhtml+xml",
  ".xml": "application/xml",
  ".svg": "image/svg+xml",
  ".css": "text/css",
  ".js": "text/javascript",
  ".mjs": "text/javascript",
  ".ts": TEXT,
  ".tsx": TEXT,
  ".jsx": TEXT,
  ".py": "text/x-python",
  ".sh": "text/x-sh",
  ".yaml": "application/yaml",
  ".yml": "application/yaml",
  ".toml": TEXT,
  ".ini": TEXT,
  ".sql": TEXT,
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".gif": "image/gif",
  ".webp": "image/webp",
  ".bmp": "image/bmp",
  ".ico": "image/vnd.microsoft.icon",
  ".avif": "image/avif",
  ".pdf": "application/pdf",
  ".zip": "application/zip",
  ".gz": "application/gzip",
  ".tar": "application/x-tar",
  ".mp3": "audio/mpeg",
  ".wav": "audio/wav",
  ".mp4": "video/mp4",
  ".webm": "video/webm",
  ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
  ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
  ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
};

/**
 * Types a browser would run script from when opened in the gateway's origin. XML is here too: an
 * XML document may carry XHTML script elements, which browsers execute.
 */
const ACTIVE_CONTENT_TYPES: ReadonlySet<string> = new Set([
  "text/html",
  "application/xhtml+xml",
  "image/svg+xml",
  "application/xml",
  "text/xml",
]);

export function isActiveContentType(contentType: string): boolean {
  return ACTIVE_CONTENT_TYPES.has(contentType.split(";")[0]!.trim().toLowerCase());
}

const SNIFF_BYTES = 8192;

/** Valid UTF-8 without NUL in the first 8 KiB; a character cut by the sample's end still counts. */
function looksLikeText(bytes: Uint8Array): boolean {
  const sample = bytes.subarray(0, SNIFF_BYTES);
  if (sample.includes(0)) return false;
  try {
    // Streaming mode holds back an incomplete trailing sequence instead of failing on it.
    new TextDecoder("utf-8", { fatal: true }).decode(sample, { stream: sample.length < bytes.length });
    return true;
  } catch {
    return false;
  }
}

/**
 * The Content-Type for a file: by extension from a fixed table (no host MIME database, so every
 * runtime answers alike); an unknown extension is plain text when the bytes look like text, as
 * upstream previews README, Makefile and logs, and an octet stream otherwise.
 */
export function contentTypeFor(fileName: string, bytes: Uint8Array): string {
  const known = CONTENT_TYPES[fileSuffix(fileName).toLowerCase()];
  const type = known ?? (looksLikeText(bytes) ? TEXT : "application/octet-stream");
  return type.startsWith("text/") || type === "application/json" ? `${type}; charset=utf-8` : type;
}

/** RFC 6266: an ASCII fallback for old clients, the exact UTF-8 name in filename*. */
export function contentDisposition(kind: "inline" | "attachment", fileName: string): string {
  const ascii = fileName.replace(/[^\x20-\x7e]|["\\]/g, "_");
  return `${kind}; filename="${ascii}"; filename*=UTF-8''${quotePathSegment(fileName)}`;
}

export type ByteRangeRequest =
  | { readonly kind: "whole" }
  | { readonly kind: "range"; readonly start: number; readonly end: number }
  | { readonly kind: "unsatisfiable" };

/**
 * One `bytes=a-b`, `bytes=a-` or `bytes=-n` range against a file of `size` bytes. A header this
 * does not understand (another unit, several ranges, a malformed or reversed range) is ignored
 * and the whole file served, which RFC 9110 allows; a well-formed range that starts past the end
 * (or an empty suffix) is unsatisfiable.
 */
export function parseByteRange(header: string | null | undefined, size: number): ByteRangeRequest {
  if (header == null) return { kind: "whole" };
  const match = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(header);
  if (!match) return { kind: "whole" };
  const [, first = "", last = ""] = match;
  if (first === "" && last === "") return { kind: "whole" };
  if (first === "") {
    const suffix = Number(last);
    if (suffix === 0 || size === 0) return { kind: "unsatisfiable" };
    return { kind: "range", start: Math.max(size - suffix, 0), end: size - 1 };
  }
  const start = Number(first);
  if (last !== "" && Number(last) < start) return { kind: "whole" };
  if (start >= size) return { kind: "unsatisfiable" };
  const end = last === "" ? size - 1 : Math.min(Number(last), size - 1);
  return { kind: "range", start, end };
}

/** Why an upload body was refused before any file in it was looked at. */
export class UploadBodyError extends DeerflowError {
  declare readonly code: "invalid_upload" | "upload_too_large";

  constructor(
    readonly status: 400 | 413,
    message: string,
  ) {
    super(status === 413 ? "upload_too_large" : "invalid_upload", message);
    this.name = "UploadBodyError";
  }
}

function tooLarge(limit: number): UploadBodyError {
  return new UploadBodyError(413, `Upload too large: the request body is over ${limit} bytes. Send fewer or smaller files.`);
}

/** The limits an upload request is held to while it streams in. */
export interface UploadStreamLimits {
  readonly maxFiles: number;
  readonly maxFileBytes: number;
  readonly maxTotalBytes: number;
  /** Bytes of the whole body, multipart framing included. */
  readonly maxBodyBytes: number;
}

export interface ReceivedUpload {
  readonly filename: string;
  readonly originalFilename: string;
  readonly size: number;
}

function mib(bytes: number): string {
  return bytes % (1024 * 1024) === 0 ? `${bytes / (1024 * 1024)} MiB` : `${bytes} bytes`;
}

const DISCARD: MultipartPartSink = { write: async () => undefined, end: async () => undefined };

/**
 * Streams the files of a multipart/form-data upload (field "files") into `batch`, one bounded
 * piece at a time, holding the request to `limits` as it goes: the body's size from Content-Length
 * before a byte is read, else while it streams in; the file count, each file's size and the total
 * as the parts arrive. Once a limit is passed nothing more is stored, and the rest is only counted
 * (the body cap bounds that) so the 413 can name the real figure. Throws UploadBodyError; the
 * caller aborts the batch on any throw, so a refused request keeps nothing.
 */
export async function streamUploadInto(
  request: Request,
  limits: UploadStreamLimits,
  batch: UploadBatch,
  nameOf: (raw: string) => { filename: string; originalFilename: string },
): Promise<ReceivedUpload[]> {
  const contentType = request.headers.get("content-type") ?? "";
  const boundary = multipartBoundary(contentType);
  if (boundary === undefined) {
    throw new UploadBodyError(400, 'No files provided: send them as multipart/form-data (with a boundary), each in a field named "files".');
  }
  const maxBytes = limits.maxBodyBytes;
  const declared = request.headers.get("content-length");
  if (declared !== null && /^\d+$/.test(declared.trim()) && Number(declared) > maxBytes) throw tooLarge(maxBytes);
  if (!request.body) throw new UploadBodyError(400, 'No files provided: the request has no body. Put the files in the field "files".');
  let received = 0;
  const counted = request.body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        received += chunk.byteLength;
        if (received > maxBytes) {
          controller.error(tooLarge(maxBytes));
          return;
        }
        controller.enqueue(chunk);
      },
    }),
  );

  const files: ReceivedUpload[] = [];
  let entries = 0;
  let total = 0;
  /** The first limit passed; from then on parts are only counted. */
  let refusal: (() => UploadBodyError) | undefined;
  try {
    await readMultipart(counted, boundary, async (part) => {
      if (part.name !== "files") return DISCARD;
      entries++;
      if (part.filename === undefined) {
        throw new UploadBodyError(
          400,
          `Entry ${entries} of the field "files" is text, not a file (a file part without a file name arrives as text). ` +
            `Send each file as a file part with a name.`,
        );
      }
      const { filename, originalFilename } = nameOf(part.filename);
      if (entries > limits.maxFiles && !refusal) {
        refusal = () =>
          new UploadBodyError(413, `Too many files: ${entries} sent, at most ${limits.maxFiles} per upload. Send them in several uploads.`);
      }
      let size = 0;
      const sink = refusal ? undefined : await batch.file(filename);
      let storing = sink !== undefined;
      return {
        async write(chunk) {
          size += chunk.length;
          total += chunk.length;
          if (storing && size > limits.maxFileBytes) {
            storing = false;
            refusal ??= () =>
              new UploadBodyError(413, `File too large: ${JSON.stringify(originalFilename)} is ${size} bytes; the limit is ${mib(limits.maxFileBytes)} per file.`);
          }
          if (storing && total > limits.maxTotalBytes) {
            storing = false;
            refusal ??= () =>
              new UploadBodyError(413, `Total upload size too large: ${total} bytes; the limit is ${mib(limits.maxTotalBytes)} per upload. Send fewer files at once.`);
          }
          if (storing) await sink!.write(chunk);
        },
        async end() {
          if (storing) await sink!.close();
          files.push({ filename, originalFilename, size });
        },
      };
    });
  } catch (error) {
    if (error instanceof UploadBodyError) throw error;
    if (error instanceof MultipartSyntaxError) {
      throw new UploadBodyError(400, `The upload is not valid multipart/form-data (${error.message}). Send the files in a FormData field named "files".`);
    }
    throw error;
  }
  if (refusal) throw refusal();
  if (files.length === 0) throw new UploadBodyError(400, 'No files provided. Put one or more files in the multipart field "files".');
  return files;
}
