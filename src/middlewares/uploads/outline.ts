/*
 * Document outlines for uploaded files. The upload pipeline converts documents (PDF, Office) to a
 * sibling `<stem>.md`; its headings, with line numbers, let the model read_file the right section
 * of a long document instead of paging through it. A port of upstream's file_outline.py, which
 * recognises the three heading shapes pymupdf4llm produces.
 */

/** At most this many headings are listed, so a 900-heading filing cannot flood the prompt. */
export const MAX_OUTLINE_ENTRIES = 50;
const OUTLINE_PREVIEW_LINES = 5;

export type OutlineEntry = { readonly title: string; readonly line: number } | { readonly truncated: true };

export interface DocumentOutline {
  /** Headings in order; a final `{ truncated: true }` marks a cut-off list. */
  readonly outline: readonly OutlineEntry[];
  /** The first non-empty lines, only when there are no headings, so the model still sees what the file is. */
  readonly preview: readonly string[];
}

// Bold, upper-case structural headings (SEC filings: "**ITEM 1. BUSINESS**"), which pymupdf4llm
// cannot promote to "#" headings because their font size matches the body text.
const BOLD_HEADING = /^\*\*((ITEM|PART|SECTION|SCHEDULE|EXHIBIT|APPENDIX|ANNEX|CHAPTER)\b[A-Z0-9 .,-]*)\*\*\s*$/u;
// "**1** **Introduction**": section number and title as separate bold spans. Only bold blocks on
// the line, a section number first, a second block that is not just numbers (a financial table's
// "**2023** **2022**" header), at most four blocks, and no "*" inside a block so matching stays linear.
const SPLIT_BOLD_HEADING =
  /^\*\*[\p{Nd}A-Z][\p{Nd}.]*\*\*\s+\*\*(?!\p{Nd}[\p{Nd}\s.,\-–—/:()%]*\*\*)[^*]+\*\*(?:\s+\*\*[^*]+\*\*){0,2}\s*$/u;
const BOLD_BLOCK = /\*\*([^*]+)\*\*/g;
const LINE_BREAK = /\r\n|\r|\n/;

/** Plain text of a heading that may carry bold artefacts: "**A** **B**" reads "A B". */
function cleanBoldTitle(raw: string): string {
  const merged = raw.replace(/\*\*\s*\*\*/g, " ").trim();
  const wrapped = /^\*\*([\s\S]+?)\*\*$/.exec(merged);
  return wrapped ? wrapped[1]!.trim() : merged;
}

/** Headings of a Markdown text with 1-based line numbers. */
export function extractOutline(markdown: string): OutlineEntry[] {
  const outline: OutlineEntry[] = [];
  const lines = markdown.split(LINE_BREAK);
  for (const [index, line] of lines.entries()) {
    const stripped = line.trim();
    if (!stripped) continue;
    let title = "";
    if (stripped.startsWith("#")) {
      title = cleanBoldTitle(stripped.replace(/^#+/, "").trim());
    } else {
      const bold = BOLD_HEADING.exec(stripped);
      if (bold) title = bold[1]!.trim();
      else if (SPLIT_BOLD_HEADING.test(stripped)) title = [...stripped.matchAll(BOLD_BLOCK)].map((m) => m[1]).join(" ");
    }
    if (title) outline.push({ title, line: index + 1 });
    if (outline.length > MAX_OUTLINE_ENTRIES) {
      outline.pop();
      outline.push({ truncated: true });
      break;
    }
  }
  return outline;
}

/** The outline of a converted document, or its first lines when it has no headings. */
export function documentOutline(markdown: string): DocumentOutline {
  const outline = extractOutline(markdown);
  if (outline.length > 0) return { outline, preview: [] };
  const preview: string[] = [];
  for (const line of markdown.split(LINE_BREAK)) {
    const stripped = line.trim();
    if (stripped) preview.push(stripped);
    if (preview.length >= OUTLINE_PREVIEW_LINES) break;
  }
  return { outline: [], preview };
}
