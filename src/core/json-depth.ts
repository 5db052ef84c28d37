/**
 * How deep a JSON text nests, found on the raw text in one pass before anything parses or walks it:
 * JSON.parse itself copes with deep nesting, but every recursive walk after it (validation,
 * cloning, hashing, serializing) overflows the stack somewhere past a few thousand levels.
 */

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const COMMA = 0x2c;

/** Path segments shown in a report; the rest is elided. */
const SHOWN_SEGMENTS = 6;
const SHOWN_KEY_CHARS = 40;

interface Frame {
  readonly array: boolean;
  /** The key (object) or index (array) of the entry being read, which leads one level deeper. */
  key: string | undefined;
  index: number;
}

/** Where a text first opens an object or array deeper than allowed: `metadata.a.a.a…`, or `body` at the top. */
export interface JsonDepthExcess {
  readonly path: string;
}

function pathOf(frames: readonly Frame[]): string {
  let path = "";
  for (const frame of frames.slice(0, SHOWN_SEGMENTS)) {
    if (frame.array) path += `[${frame.index}]`;
    else {
      const key = frame.key ?? "";
      path += `${path === "" ? "" : "."}${key.length > SHOWN_KEY_CHARS ? `${key.slice(0, SHOWN_KEY_CHARS)}…` : key}`;
    }
  }
  if (frames.length > SHOWN_SEGMENTS) path += "…";
  return path === "" ? "body" : path;
}

/**
 * Undefined when no object or array in `text` nests deeper than `maxDepth` levels (the outermost
 * value is level 1), else where the first one that does opens. Linear in the text's length and
 * never deeper than `maxDepth` in memory; text that is not JSON is left for the parser to refuse.
 */
export function jsonDepthExcess(text: string, maxDepth: number): JsonDepthExcess | undefined {
  const frames: Frame[] = [];
  let expectKey = false;
  const length = text.length;
  for (let i = 0; i < length; i++) {
    const ch = text.charCodeAt(i);
    if (ch === QUOTE) {
      const start = i + 1;
      for (i = start; i < length; i++) {
        const inner = text.charCodeAt(i);
        if (inner === BACKSLASH) i++;
        else if (inner === QUOTE) break;
      }
      if (expectKey) {
        frames[frames.length - 1]!.key = text.slice(start, Math.min(i, start + SHOWN_KEY_CHARS + 1));
        expectKey = false;
      }
    } else if (ch === OPEN_OBJECT || ch === OPEN_ARRAY) {
      if (frames.length >= maxDepth) return { path: pathOf(frames) };
      frames.push({ array: ch === OPEN_ARRAY, key: undefined, index: 0 });
      expectKey = ch === OPEN_OBJECT;
    } else if (ch === CLOSE_OBJECT || ch === CLOSE_ARRAY) {
      frames.pop();
      expectKey = false;
    } else if (ch === COMMA) {
      const top = frames[frames.length - 1];
      if (top?.array) top.index++;
      else if (top) expectKey = true;
    }
  }
  return undefined;
}
