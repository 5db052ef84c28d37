import { fileSuffix } from "../middlewares/uploads.ts";
import { quotePathSegment } from "./files-names.ts";

/**
 * The HTTP side of thread files: which content type an artifact is served as, when it must be
 * downloaded instead of shown, byte ranges, and reading an upload body without trusting its size.
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
export class UploadBodyError extends Error {
  constructor(
    readonly status: 400 | 413,
    message: string,
  ) {
    super(message);
    this.name = "UploadBodyError";
  }
}

function tooLarge(limit: number): UploadBodyError {
  return new UploadBodyError(413, `Upload too large: the request body is over ${limit} bytes. Send fewer or smaller files.`);
}

/**
 * Parses a multipart/form-data body, refusing it (413) as soon as it is known to exceed `maxBytes`:
 * from Content-Length before a byte is read, else while it streams in, so a chunked body that
 * never ends cannot make the gateway buffer it all.
 */
export async function readMultipartWithin(request: Request, maxBytes: number): Promise<FormData> {
  const contentType = request.headers.get("content-type") ?? "";
  if (!/^multipart\/form-data\s*;/i.test(contentType)) {
    throw new UploadBodyError(400, 'No files provided: send them as multipart/form-data, each in a field named "files".');
  }
  const declared = request.headers.get("content-length");
  if (declared !== null && /^\d+$/.test(declared.trim()) && Number(declared) > maxBytes) throw tooLarge(maxBytes);
  if (!request.body) throw new UploadBodyError(400, 'No files provided: the request has no body. Put the files in the field "files".');
  let received = 0;
  let exceeded = false;
  const counted = request.body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        received += chunk.byteLength;
        if (received > maxBytes) {
          exceeded = true;
          controller.error(tooLarge(maxBytes));
          return;
        }
        controller.enqueue(chunk);
      },
    }),
  );
  try {
    return await new Response(counted, { headers: { "content-type": contentType } }).formData();
  } catch (error) {
    if (exceeded) throw tooLarge(maxBytes);
    throw new UploadBodyError(
      400,
      `The upload is not valid multipart/form-data (${(error as Error)?.message ?? String(error)}). Send the files in a FormData field named "files".`,
    );
  }
}
