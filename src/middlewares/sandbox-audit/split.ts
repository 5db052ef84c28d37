/*
 * Text primitives for the SandboxAudit classifier. The rules were written and tested against
 * Python's whitespace, word and shlex semantics; these helpers reproduce them exactly, so a
 * command gets the same verdict here as upstream (a JS `\s` or `trim()` would disagree on
 * characters such as U+001C or U+FEFF, and a blind spot in either direction is a real gap).
 */

import { DeerflowError } from "../../core/errors.ts";

/** The characters Python's `str.isspace()` (and `re`'s `\s` for str patterns) accept. */
export const PY_SPACE_CLASS_BODY = String.raw`\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000`;

const PY_SPACE_RUN = new RegExp(`[${PY_SPACE_CLASS_BODY}]+`, "u");
const PY_LEADING_SPACE = new RegExp(`^[${PY_SPACE_CLASS_BODY}]+`, "u");
const PY_TRAILING_SPACE = new RegExp(`[${PY_SPACE_CLASS_BODY}]+$`, "u");

/** Python's `text.strip()`. */
export function pyStrip(text: string): string {
  return text.replace(PY_LEADING_SPACE, "").replace(PY_TRAILING_SPACE, "");
}

/** Python's `" ".join(text.split())`: whitespace runs collapse to one space, ends trimmed. */
export function collapseWhitespace(text: string): string {
  const stripped = pyStrip(text);
  return stripped === "" ? "" : stripped.split(PY_SPACE_RUN).join(" ");
}

/** Length in code points, which is what Python's `len` reports for the same text. */
export function codePointLength(text: string): number {
  let length = 0;
  for (let index = 0; index < text.length; index += 1) {
    const unit = text.charCodeAt(index);
    if (unit >= 0xd800 && unit <= 0xdbff && index + 1 < text.length) {
      const next = text.charCodeAt(index + 1);
      if (next >= 0xdc00 && next <= 0xdfff) index += 1;
    }
    length += 1;
  }
  return length;
}

/** The first `count` code points of `text`. */
export function codePointPrefix(text: string, count: number): string {
  let taken = 0;
  let end = 0;
  while (end < text.length && taken < count) {
    const unit = text.charCodeAt(end);
    const pair = unit >= 0xd800 && unit <= 0xdbff && end + 1 < text.length && (text.charCodeAt(end + 1) & 0xfc00) === 0xdc00;
    end += pair ? 2 : 1;
    taken += 1;
  }
  return text.slice(0, end);
}

/** Why a command could not be tokenised the way a POSIX shell lexer would. */
export class ShlexError extends DeerflowError {
  constructor(message: string) {
    super("shlex_syntax_error", message);
    this.name = "ShlexError";
  }
}

const SHLEX_WHITESPACE = " \t\r\n";

type LexState = " " | "a" | "'" | '"' | "\\" | null;

/**
 * Python's `shlex.split(text)` (POSIX mode, whitespace_split, no comments). Throws ShlexError on an
 * unclosed quote or a trailing escape, as shlex raises ValueError; the classifier then falls back
 * to the raw text, which it has already checked.
 */
export function shlexSplit(text: string): string[] {
  let index = 0;
  let state: LexState = " ";
  let token = "";

  const readToken = (): string | null => {
    let quoted = false;
    let escapedState: LexState = " ";
    for (;;) {
      const next = index < text.length ? text[index++]! : "";
      if (state === null) {
        token = "";
        break;
      } else if (state === " ") {
        if (next === "") {
          state = null;
          break;
        } else if (SHLEX_WHITESPACE.includes(next)) {
          if (token !== "" || quoted) break;
        } else if (next === "\\") {
          escapedState = "a";
          state = "\\";
        } else if (next === "'" || next === '"') {
          state = next;
        } else {
          token = next;
          state = "a";
        }
      } else if (state === "'" || state === '"') {
        quoted = true;
        if (next === "") throw new ShlexError("No closing quotation");
        if (next === state) {
          state = "a";
        } else if (next === "\\" && state === '"') {
          escapedState = state;
          state = "\\";
        } else {
          token += next;
        }
      } else if (state === "\\") {
        if (next === "") throw new ShlexError("No escaped character");
        // Inside double quotes only the quote itself and the backslash can be escaped; any other
        // character keeps its backslash.
        if (escapedState === '"' && next !== state && next !== escapedState) token += state;
        token += next;
        state = escapedState;
      } else {
        if (next === "") {
          state = null;
          break;
        } else if (SHLEX_WHITESPACE.includes(next)) {
          state = " ";
          if (token !== "" || quoted) break;
        } else if (next === "'" || next === '"') {
          state = next;
        } else if (next === "\\") {
          escapedState = "a";
          state = "\\";
        } else {
          token += next;
        }
      }
    }
    const result = token;
    token = "";
    return !quoted && result === "" ? null : result;
  };

  const tokens: string[] = [];
  for (let next = readToken(); next !== null; next = readToken()) tokens.push(next);
  return tokens;
}

/*
 * A heredoc header and its delimiter: `<<EOF`, `<< EOF`, `<<-EOF`, `<<\EOF`, `<<'EOF'`,
 * `<<"EOF"`. The look-ahead rejects a here-string `<<<` at its first `<`, and the look-behind stops
 * its trailing `<<` from matching one character later, where `<<< "text"` would read as a heredoc
 * delimited by `text` whose body swallows every following statement.
 */
export const HEREDOC_HEADER_SOURCE = String.raw`(?<!<)<<(?!<)-?[ \t]*(?:\\?([A-Za-z_][\p{L}\p{N}_.\-]*)|'([^'\n]*)'|"([^"\n]*)")`;
const HEREDOC_HEADER = new RegExp(HEREDOC_HEADER_SOURCE, "uy");

function matchHeredocHeader(command: string, index: number): { text: string; delimiter: string } | null {
  HEREDOC_HEADER.lastIndex = index;
  const match = HEREDOC_HEADER.exec(command);
  if (!match) return null;
  return { text: match[0], delimiter: match[1] ?? match[2] ?? match[3] ?? "" };
}

/**
 * The index just past the bodies of the heredocs opened so far, consumed in header order, each up
 * to a line whose stripped text equals its delimiter (which also covers `<<-` tab stripping). An
 * unterminated body runs to the end: everything after its header really is body.
 */
function consumeHeredocBodies(command: string, start: number, delimiters: readonly string[]): number {
  let index = start;
  for (const delimiter of delimiters) {
    let terminated = false;
    while (index < command.length) {
      const newline = command.indexOf("\n", index);
      if (newline === -1) return command.length;
      const line = command.slice(index, newline);
      index = newline + 1;
      if (pyStrip(line) === delimiter) {
        terminated = true;
        break;
      }
    }
    if (!terminated) return command.length;
  }
  return index;
}

export interface SplitOptions {
  /** Also split on `|`: the word after a pipe starts a new command position. */
  readonly splitPipes?: boolean;
}

/**
 * Splits a compound command into sub-commands on unquoted `&&`, `||`, `;`, newlines (a statement
 * separator exactly like `;`) and, with `splitPipes`, `|`, even without surrounding spaces
 * (`safe;rm -rf /`). Heredoc bodies stay with their command as data, so a body line starting with
 * `$(curl u)` is never promoted to a command position; `<<<` and a `<<` inside `$(( ))` or `(( ))`
 * (a bit shift) open no body. An unclosed quote or a trailing escape returns the whole command:
 * classifying the unsplit text is safer than silently dropping parts. This is a heuristic, not a
 * shell parser; where it is unsure it errs towards more command positions, never fewer.
 */
export function splitCompoundCommand(command: string, options: SplitOptions = {}): string[] {
  const splitPipes = options.splitPipes ?? false;
  const parts: string[] = [];
  let current = "";
  let pendingHeredocs: string[] = [];
  let inSingleQuote = false;
  let inDoubleQuote = false;
  let arithmeticDepth = 0;
  let escaping = false;
  let index = 0;

  const closePart = (): void => {
    const part = pyStrip(current);
    if (part !== "") parts.push(part);
    current = "";
  };

  while (index < command.length) {
    const char = command[index]!;

    if (escaping) {
      current += char;
      escaping = false;
      index += 1;
      continue;
    }
    if (char === "\\" && !inSingleQuote) {
      current += char;
      escaping = true;
      index += 1;
      continue;
    }
    if (char === "'" && !inDoubleQuote) {
      inSingleQuote = !inSingleQuote;
      current += char;
      index += 1;
      continue;
    }
    if (char === '"' && !inSingleQuote) {
      inDoubleQuote = !inDoubleQuote;
      current += char;
      index += 1;
      continue;
    }

    if (!inSingleQuote && !inDoubleQuote) {
      // An unclosed `((` leaves the depth positive, which only disables heredoc detection: newlines
      // keep splitting, so the failure still leans towards more command positions.
      if (char === "(" && command.startsWith("((", index)) {
        arithmeticDepth += 1;
        current += "((";
        index += 2;
        continue;
      }
      if (arithmeticDepth > 0 && char === ")" && command.startsWith("))", index)) {
        arithmeticDepth -= 1;
        current += "))";
        index += 2;
        continue;
      }
      if (char === "<" && arithmeticDepth === 0) {
        const header = matchHeredocHeader(command, index);
        if (header) {
          pendingHeredocs.push(header.delimiter);
          current += header.text;
          index += header.text.length;
          continue;
        }
      }
      if (char === "\n") {
        // The newline after a heredoc header ends the statement, and the body belongs to it.
        if (pendingHeredocs.length > 0) {
          const bodyEnd = consumeHeredocBodies(command, index + 1, pendingHeredocs);
          pendingHeredocs = [];
          current += command.slice(index, bodyEnd);
          index = bodyEnd;
        } else {
          index += 1;
        }
        closePart();
        continue;
      }
      if (command.startsWith("&&", index) || command.startsWith("||", index)) {
        closePart();
        index += 2;
        continue;
      }
      // After `||`, so a single `|` cannot take half of that operator.
      if (splitPipes && char === "|") {
        closePart();
        index += 1;
        continue;
      }
      if (char === ";") {
        closePart();
        index += 1;
        continue;
      }
    }

    current += char;
    index += 1;
  }

  if (inSingleQuote || inDoubleQuote || escaping) return [command];
  closePart();
  return parts.length > 0 ? parts : [command];
}
