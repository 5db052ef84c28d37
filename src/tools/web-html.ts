// HTML to readable text without a DOM: what web_fetch hands the model for an HTML page.

const NAMED_ENTITIES: Readonly<Record<string, string>> = {
  amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: " ", ndash: "–", mdash: "—", hellip: "…",
  copy: "©", reg: "®", trade: "™", laquo: "«", raquo: "»", lsquo: "‘", rsquo: "’", ldquo: "“", rdquo: "”",
  bull: "•", middot: "·", times: "×", divide: "÷", euro: "€", pound: "£", yen: "¥", cent: "¢", sect: "§",
  para: "¶", deg: "°", plusmn: "±", larr: "←", rarr: "→", uarr: "↑", darr: "↓", shy: "",
};

export function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (entity, body: string) => {
    if (body[0] === "#") {
      const code = body[1] === "x" || body[1] === "X" ? parseInt(body.slice(2), 16) : parseInt(body.slice(1), 10);
      return Number.isInteger(code) && code > 0 && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff) ? String.fromCodePoint(code) : entity;
    }
    return NAMED_ENTITIES[body.toLowerCase()] ?? entity;
  });
}

const TAG = /<\/?([a-zA-Z][a-zA-Z0-9-]*)((?:\s+[^\s"'>/=]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s>]+))?)*)\s*\/?>/g;
const DROPPED_ELEMENTS = ["script", "style", "noscript", "template", "svg", "iframe", "canvas", "head", "nav", "footer", "aside", "button", "select"];
const BLOCK_ELEMENTS = new Set([
  "p", "div", "section", "article", "main", "header", "table", "tr", "ul", "ol", "dl", "dt", "dd", "blockquote",
  "figure", "figcaption", "form", "fieldset", "details", "summary", "hr", "address",
]);

function attribute(attrs: string, name: string): string | undefined {
  const match = attrs.match(new RegExp(`\\s${name}\\s*=\\s*(?:"([^"]*)"|'([^']*)'|([^\\s>]+))`, "i"));
  return match ? decodeEntities(match[1] ?? match[2] ?? match[3] ?? "") : undefined;
}

function innerOf(html: string, element: string): string | undefined {
  const match = html.match(new RegExp(`<${element}\\b[^>]*>([\\s\\S]*)</${element}\\s*>`, "i"));
  return match?.[1];
}

/**
 * Readable text of an HTML page, Markdown-flavoured: headings as `#`, list items as `- `, links as
 * `[text](url)`, preformatted blocks fenced. The page's <article> or <main> is preferred over the
 * whole body, and scripts, styles and navigation chrome are dropped.
 */
export function htmlToText(html: string, baseUrl?: string): { title: string; text: string } {
  const titleMatch = html.match(/<title\b[^>]*>([\s\S]*?)<\/title\s*>/i);
  const title = titleMatch ? decodeEntities(titleMatch[1]!.replace(/<[^>]*>/g, "")).replace(/\s+/g, " ").trim() : "";
  let body = html.replace(/<!--[\s\S]*?-->/g, "").replace(/<!\[CDATA\[[\s\S]*?\]\]>/g, "");
  for (const element of DROPPED_ELEMENTS) {
    body = body.replace(new RegExp(`<${element}\\b[\\s\\S]*?</${element}\\s*>`, "gi"), " ");
  }
  body = innerOf(body, "article") ?? innerOf(body, "main") ?? innerOf(body, "body") ?? body;

  const preserved: string[] = [];
  body = body.replace(/<pre\b[^>]*>([\s\S]*?)<\/pre\s*>/gi, (_m, inner: string) => {
    preserved.push(`\n\n\`\`\`\n${decodeEntities(inner.replace(/<[^>]*>/g, "")).replace(/^\n+|\s+$/g, "")}\n\`\`\`\n\n`);
    return `\u0000${preserved.length - 1}\u0000`;
  });

  const links: string[] = [];
  body = body.replace(TAG, (_tag, rawName: string, attrs: string) => {
    const name = rawName.toLowerCase();
    const closing = _tag.startsWith("</");
    const heading = name.match(/^h([1-6])$/);
    if (heading) return closing ? "\n\n" : `\n\n${"#".repeat(Number(heading[1]))} `;
    if (name === "br") return "\n";
    if (name === "li") return closing ? "" : "\n- ";
    if (name === "td" || name === "th") return " ";
    if (name === "a") {
      if (closing) return links.pop() ?? "";
      const href = attribute(attrs, "href");
      let target: string | undefined;
      try {
        target = href ? new URL(href, baseUrl).href : undefined;
      } catch {
        target = undefined;
      }
      const usable = target !== undefined && /^https?:/i.test(target);
      links.push(usable ? `](${target})` : "");
      return usable ? "[" : "";
    }
    if (name === "img") {
      const alt = attribute(attrs, "alt");
      return alt ? ` ${alt} ` : "";
    }
    return BLOCK_ELEMENTS.has(name) ? "\n\n" : "";
  });
  // Tags the pattern could not read (malformed markup) must not leak through as text.
  body = body.replace(/<[^>]*>/g, "");
  body = decodeEntities(body)
    .replace(/\[\s*\]\([^)]*\)/g, "")
    .replace(/[ \t\f\v\r\u00a0]+/g, " ")
    .split("\n")
    .map((line) => line.trim())
    .join("\n")
    .replace(/\n{3,}/g, "\n\n")
    .trim();
  body = body.replace(/\u0000(\d+)\u0000/g, (_m, index: string) => preserved[Number(index)] ?? "").replace(/\n{3,}/g, "\n\n").trim();
  return { title, text: body };
}
