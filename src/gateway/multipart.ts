/**
 * A streaming multipart/form-data reader: each part's body is handed on in pieces as it arrives,
 * so no part is ever held whole. Written here rather than taken from npm because the portable
 * parsers at hand (`@mjackson/multipart-parser` 0.10, `@remix-run/multipart-parser`) buffer every
 * part whole before yielding it, which is the thing an upload of tens of megabytes must not do.
 */

import { DeerflowError } from "../core/errors.ts";

/** What a part's headers say about it. */
export interface MultipartPartInfo {
  /** The form field's name. */
  readonly name: string;
  /** The file name a file part carries; undefined for a text field (and for a file sent without one). */
  readonly filename: string | undefined;
}

/** Where one part's body goes; `write` may apply backpressure by resolving late. */
export interface MultipartPartSink {
  write(chunk: Uint8Array): Promise<void>;
  end(): Promise<void>;
}

/** The body is not well-formed multipart; the message says what was wrong. */
export class MultipartSyntaxError extends DeerflowError {
  declare readonly code: "invalid_multipart";

  constructor(message: string) {
    super("invalid_multipart", message);
    this.name = "MultipartSyntaxError";
  }
}

/** A part's headers may not grow past this before their blank line. */
const MAX_HEADER_BYTES = 16 * 1024;
const CRLF = new Uint8Array([13, 10]);
const HEADER_END = new Uint8Array([13, 10, 13, 10]);
const utf8 = new TextDecoder();

/** The boundary of a multipart/form-data Content-Type, or undefined when it has none (RFC 2046: 1-70 characters). */
export function multipartBoundary(contentType: string): string | undefined {
  if (!/^multipart\/form-data\s*;/i.test(contentType)) return undefined;
  const match = /;\s*boundary\s*=\s*(?:"([^"]{1,70})"|([^\s;"]{1,70}))\s*(?:;|$)/i.exec(contentType);
  return match?.[1] ?? match?.[2];
}

function indexOfBytes(haystack: Uint8Array, needle: Uint8Array, from = 0): number {
  const first = needle[0]!;
  const last = haystack.length - needle.length;
  for (let i = haystack.indexOf(first, from); i !== -1 && i <= last; i = haystack.indexOf(first, i + 1)) {
    let j = 1;
    while (j < needle.length && haystack[i + j] === needle[j]) j++;
    if (j === needle.length) return i;
  }
  return -1;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) return b;
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

/**
 * HTML's form encoding writes `"`, CR and LF in a field or file name as %22, %0D and %0A, and
 * nothing else; only those are decoded, so a literal `%41` in a name stays as it is.
 */
function unescapeFormName(value: string): string {
  return value.replace(/%(22|0A|0D)/gi, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
}

function dispositionParameter(header: string, key: string): string | undefined {
  const pattern = new RegExp(`;\\s*${key}\\s*=\\s*(?:"([^"]*)"|([^;\\s]*))`, "i");
  const match = pattern.exec(header);
  if (!match) return undefined;
  return match[1] ?? match[2] ?? "";
}

function partInfo(headerBlock: string): MultipartPartInfo {
  let disposition: string | undefined;
  for (const line of headerBlock.split("\r\n")) {
    const colon = line.indexOf(":");
    if (colon > 0 && line.slice(0, colon).trim().toLowerCase() === "content-disposition") disposition = line.slice(colon + 1).trim();
  }
  if (disposition === undefined || !/^form-data\s*(;|$)/i.test(disposition)) {
    throw new MultipartSyntaxError('a part has no "Content-Disposition: form-data" header');
  }
  const name = dispositionParameter(disposition, "name");
  if (name === undefined) throw new MultipartSyntaxError("a part's Content-Disposition has no name");
  const extended = dispositionParameter(disposition, "filename\\*");
  let filename = dispositionParameter(disposition, "filename");
  const encoded = extended === undefined ? undefined : /^utf-8'[^']*'(.*)$/i.exec(extended)?.[1];
  if (encoded !== undefined) {
    try {
      filename = decodeURIComponent(encoded);
    } catch {
      throw new MultipartSyntaxError("a part's filename* is not valid percent-encoded UTF-8");
    }
  }
  return { name: unescapeFormName(name), filename: filename === undefined ? undefined : unescapeFormName(filename) };
}

/**
 * Reads `body` as multipart/form-data with `boundary`, calling `onPart` for each part in order and
 * feeding its body to the sink it returns before the next part begins. Resolves after the closing
 * boundary and the end of the body; throws MultipartSyntaxError for a malformed body, and
 * whatever `onPart` or a sink throws, after cancelling the body.
 */
export async function readMultipart(
  body: ReadableStream<Uint8Array>,
  boundary: string,
  onPart: (part: MultipartPartInfo) => Promise<MultipartPartSink>,
): Promise<void> {
  const delimiter = new TextEncoder().encode(`\r\n--${boundary}`);
  const reader = body.getReader();
  // The first boundary needs no line break before it: one is supplied, so one delimiter fits all.
  let buffer: Uint8Array = CRLF;
  let state: "preamble" | "after-boundary" | "headers" | "body" | "done" = "preamble";
  let sink: MultipartPartSink | undefined;
  let ended = false;
  try {
    while (state !== "done") {
      let progressed = true;
      while (progressed && state !== "done") {
        progressed = false;
        if (state === "preamble") {
          const at = indexOfBytes(buffer, delimiter);
          if (at === -1) {
            // Only a possible start of the delimiter is worth keeping.
            buffer = buffer.subarray(Math.max(0, buffer.length - delimiter.length + 1));
          } else {
            buffer = buffer.subarray(at + delimiter.length);
            state = "after-boundary";
            progressed = true;
          }
        } else if (state === "after-boundary") {
          // RFC 2046 allows linear white space between a boundary and its line break.
          let i = 0;
          while (i < buffer.length && (buffer[i] === 32 || buffer[i] === 9)) i++;
          if (buffer.length - i < 2) {
            if (i > 256) throw new MultipartSyntaxError("a boundary line is followed by too much white space");
          } else if (buffer[i] === 45 && buffer[i + 1] === 45) {
            state = "done";
          } else if (buffer[i] === 13 && buffer[i + 1] === 10) {
            buffer = buffer.subarray(i + 2);
            state = "headers";
            progressed = true;
          } else {
            throw new MultipartSyntaxError("a boundary is followed by something other than a line break or the closing --");
          }
        } else if (state === "headers") {
          let end: number;
          let skip: number;
          if (buffer.length >= 2 && buffer[0] === 13 && buffer[1] === 10) {
            end = 0;
            skip = 2;
          } else {
            end = indexOfBytes(buffer, HEADER_END);
            skip = 4;
          }
          if (end === -1) {
            if (buffer.length > MAX_HEADER_BYTES) throw new MultipartSyntaxError(`a part's headers are over ${MAX_HEADER_BYTES} bytes`);
          } else {
            const info = partInfo(utf8.decode(buffer.subarray(0, end)));
            buffer = buffer.subarray(end + skip);
            sink = await onPart(info);
            state = "body";
            progressed = true;
          }
        } else if (state === "body") {
          const at = indexOfBytes(buffer, delimiter);
          if (at === -1) {
            const safe = buffer.length - delimiter.length + 1;
            if (safe > 0) {
              await sink!.write(buffer.subarray(0, safe));
              buffer = buffer.subarray(safe);
            }
          } else {
            if (at > 0) await sink!.write(buffer.subarray(0, at));
            const finished = sink!;
            sink = undefined;
            await finished.end();
            buffer = buffer.subarray(at + delimiter.length);
            state = "after-boundary";
            progressed = true;
          }
        }
      }
      if ((state as string) === "done") break;
      const next = await reader.read();
      if (next.done) {
        ended = true;
        throw new MultipartSyntaxError(
          state === "preamble" ? `no boundary "${boundary}" was found in the body` : "the body ended before the closing boundary",
        );
      }
      if (state === "body" && buffer.length < delimiter.length && next.value.length >= delimiter.length) {
        // The common case in a file: only a short tail is left. Unless a delimiter starts in that
        // tail, the tail is body and the new chunk is searched as it is, without copying it.
        const probe = concat(buffer, next.value.subarray(0, delimiter.length - 1));
        const at = indexOfBytes(probe, delimiter);
        if (at === -1 || at >= buffer.length) {
          if (buffer.length > 0) await sink!.write(buffer);
          buffer = next.value;
          continue;
        }
      }
      // What is left is at most a delimiter's length (or a header block), so this copy stays small.
      buffer = concat(buffer, next.value);
    }
    // The epilogue is read to the end rather than cancelled: the caller caps the body's size, and
    // Node's own FormData body throws an uncaught error when cancelled as it closes.
    while (!(await reader.read()).done);
    ended = true;
  } finally {
    if (!ended) await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
}
