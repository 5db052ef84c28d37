import { ToolMessage } from "@langchain/core/messages";
import { isGraphBubbleUp } from "@langchain/langgraph/web";
import * as v from "valibot";
import type { Assert, SameType } from "../core/types.ts";
import { DeerflowError, errorMessage } from "../core/errors.ts";
import type { AgentRuntime, AgentTool, ToolContext, ToolOutput } from "../engine/types.ts";
import type { Clock, Env } from "../ports/runtime-ports.ts";

/*
 * web_fetch and web_search over the Web-standard fetch. web_fetch is reachable by whatever the
 * model (or a page it read) writes, so it refuses anything but http(s) to public hosts, re-checks
 * every redirect hop, reads at most max_bytes within one deadline, and only reads text. A hostname
 * is checked as written: without a resolver (the `resolveHost` dependency) a public name that
 * resolves to a private address is not caught, and even with one the fetch may resolve again.
 * web_search needs a provider; with none configured the tool is simply not offered.
 */

export const WEB_FETCH_TOOL_NAME = "web_fetch";
export const WEB_SEARCH_TOOL_NAME = "web_search";
const DEFAULT_USER_AGENT = "deerflow-edge/0.1 (web_fetch)";
const REDIRECT_STATUSES: ReadonlySet<number> = new Set([301, 302, 303, 307, 308]);

const positiveSeconds = v.pipe(
  v.number(),
  v.check((n) => Number.isFinite(n) && n > 0, (issue) => `expected a number of seconds above 0, got ${String(issue.input)}`),
);
const positiveInteger = v.pipe(v.number(), v.integer(), v.minValue(1));

/** config.yaml `web_fetch`. */
export const WebFetchConfigSchema = v.strictObject({
  /** Seconds for the whole fetch, redirects and body included. */
  timeout: v.optional(positiveSeconds, 10),
  /** Bytes of body read at most; the rest is never downloaded. */
  max_bytes: v.optional(positiveInteger, 2 * 1024 * 1024),
  /** Characters of page text handed to the model. */
  max_chars: v.optional(positiveInteger, 4096),
  max_redirects: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(20)), 5),
  /** Lets web_fetch reach loopback and private networks: for tests and trusted intranets only. */
  allow_private_hosts: v.optional(v.boolean(), false),
  user_agent: v.optional(v.pipe(v.string(), v.minLength(1)), DEFAULT_USER_AGENT),
});
export interface WebFetchConfig {
  timeout: number;
  max_bytes: number;
  max_chars: number;
  max_redirects: number;
  allow_private_hosts: boolean;
  user_agent: string;
}
type _WebFetchConfigMatches = Assert<SameType<WebFetchConfig, v.InferOutput<typeof WebFetchConfigSchema>>>;
export const WEB_FETCH_DEFAULTS: WebFetchConfig = Object.freeze(v.parse(WebFetchConfigSchema, {}));

/** config.yaml `web_search`. */
export const WebSearchConfigSchema = v.strictObject({
  /** The built-in provider to use when none is passed in code; without one there is no web_search tool. */
  provider: v.optional(v.picklist(["tavily"])),
  /** Environment variable holding the provider's API key. */
  api_key_env: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "expected an environment variable name such as TAVILY_API_KEY")), "TAVILY_API_KEY"),
  base_url: v.optional(v.pipe(v.string(), v.url())),
  max_results: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(20)), 5),
  timeout: v.optional(positiveSeconds, 15),
});
export interface WebSearchConfig {
  provider?: "tavily";
  api_key_env: string;
  base_url?: string;
  max_results: number;
  timeout: number;
}
type _WebSearchConfigMatches = Assert<SameType<WebSearchConfig, v.InferOutput<typeof WebSearchConfigSchema>>>;
export const WEB_SEARCH_DEFAULTS: WebSearchConfig = Object.freeze(v.parse(WebSearchConfigSchema, {}));

export interface WebSearchResult {
  readonly title: string;
  readonly url: string;
  readonly snippet: string;
}

/** A search backend. Errors may be thrown; the tool turns them into an error result. */
export interface WebSearchProvider {
  readonly name: string;
  search(query: string, options: { readonly maxResults: number; readonly signal?: AbortSignal }): Promise<WebSearchResult[]>;
}

export interface WebToolDeps {
  /** Default the global fetch. */
  readonly fetch?: typeof fetch;
  /** Resolves a hostname to its addresses so names that point into private networks are refused too. */
  readonly resolveHost?: (hostname: string) => Promise<readonly string[]>;
}

function parseConfig<T extends v.GenericSchema>(schema: T, input: unknown, section: string): v.InferOutput<T> {
  const result = v.safeParse(schema, input ?? {});
  if (result.success) return result.output;
  const issue = result.issues[0];
  const path = v.getDotPath(issue);
  throw new DeerflowError("invalid_tool_config", `${section}${path ? `.${path}` : ""}: ${issue.message}. Remove or fix this key.`);
}

function rethrowIfControlFlow(error: unknown, runtime: AgentRuntime): void {
  if (isGraphBubbleUp(error)) throw error;
  if (runtime.signal?.aborted) throw error;
}

// ---------------------------------------------------------------------------------------------
// Host checks

function parseIPv4(host: string): number[] | undefined {
  const parts = host.split(".");
  if (parts.length !== 4 || !parts.every((part) => /^\d{1,3}$/.test(part))) return undefined;
  const octets = parts.map(Number);
  return octets.every((n) => n <= 255) ? octets : undefined;
}

function isPrivateIPv4([a, b, c]: number[]): boolean {
  return (
    a === 0 || a === 10 || a === 127 || a! >= 224 || // this network, private, loopback, multicast and reserved
    (a === 100 && b! >= 64 && b! <= 127) || // carrier-grade NAT
    (a === 169 && b === 254) || // link-local, cloud metadata
    (a === 172 && b! >= 16 && b! <= 31) ||
    (a === 192 && b === 168) ||
    (a === 192 && b === 0 && (c === 0 || c === 2)) ||
    (a === 198 && (b === 18 || b === 19)) ||
    (a === 198 && b === 51 && c === 100) ||
    (a === 203 && b === 0 && c === 113)
  );
}

/** Eight 16-bit groups, or undefined when the text is not an IPv6 address. */
function parseIPv6(text: string): number[] | undefined {
  let host = text.replace(/^\[|\]$/g, "").split("%")[0]!;
  const tail = host.match(/(\d+\.\d+\.\d+\.\d+)$/);
  if (tail) {
    const v4 = parseIPv4(tail[1]!);
    if (!v4) return undefined;
    host = `${host.slice(0, -tail[1]!.length)}${((v4[0]! << 8) | v4[1]!).toString(16)}:${((v4[2]! << 8) | v4[3]!).toString(16)}`;
  }
  const halves = host.split("::");
  if (halves.length > 2) return undefined;
  const read = (part: string) => (part === "" ? [] : part.split(":"));
  const head = read(halves[0]!);
  const rest = halves.length === 2 ? read(halves[1]!) : [];
  const missing = 8 - head.length - rest.length;
  if ((halves.length === 1 && missing !== 0) || missing < 0) return undefined;
  const groups = [...head, ...Array<string>(halves.length === 2 ? missing : 0).fill("0"), ...rest];
  if (!groups.every((group) => /^[0-9a-f]{1,4}$/i.test(group))) return undefined;
  return groups.map((group) => parseInt(group, 16));
}

function isPrivateIPv6(groups: number[]): boolean {
  const [g0, g1, g2, g3, g4, g5, g6, g7] = groups as [number, number, number, number, number, number, number, number];
  const embedded = [g6 >> 8, g6 & 0xff, g7 >> 8, g7 & 0xff];
  if (groups.every((g) => g === 0)) return true; // unspecified
  if (g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0 && g4 === 0) {
    if (g5 === 0 && g6 === 0 && g7 === 1) return true; // loopback
    if (g5 === 0xffff || g5 === 0) return isPrivateIPv4(embedded); // IPv4-mapped and -compatible
  }
  if (g0 === 0x64 && g1 === 0xff9b) return isPrivateIPv4(embedded); // NAT64
  if (g0 === 0x2002) return isPrivateIPv4([g1 >> 8, g1 & 0xff, g2 >> 8, g2 & 0xff]); // 6to4
  return (g0 & 0xfe00) === 0xfc00 || (g0 & 0xffc0) === 0xfe80 || (g0 & 0xff00) === 0xff00; // unique-local, link-local, multicast
}

/** An address literal in a private, loopback, link-local or otherwise non-public range. */
export function isPrivateAddress(address: string): boolean {
  const v4 = parseIPv4(address);
  if (v4) return isPrivateIPv4(v4);
  const v6 = parseIPv6(address);
  return v6 ? isPrivateIPv6(v6) : false;
}

/** A hostname (as URL parsing writes it) that names this machine or a private network. */
export function isPrivateHost(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/\.$/, "");
  if (host === "localhost" || host.endsWith(".localhost") || host.endsWith(".local") || host.endsWith(".internal")) return true;
  return isPrivateAddress(host);
}

// ---------------------------------------------------------------------------------------------
// HTML to text

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

// ---------------------------------------------------------------------------------------------
// web_fetch

const TEXT_TYPES = new Set(["application/json", "application/ld+json", "application/xml", "application/xhtml+xml", "application/rss+xml", "application/atom+xml", "application/javascript"]);

function mediaType(contentType: string | null): string {
  return (contentType ?? "").split(";")[0]!.trim().toLowerCase();
}

function charsetOf(contentType: string | null): string {
  const match = (contentType ?? "").match(/charset\s*=\s*"?([^";\s]+)/i);
  return match?.[1]?.toLowerCase() ?? "utf-8";
}

function decodeBody(bytes: Uint8Array, charset: string): string {
  try {
    return new TextDecoder(charset).decode(bytes);
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    return new TextDecoder("utf-8").decode(bytes);
  }
}

/** Whether bytes of unknown type look like text: no NUL in the first kilobytes. */
function looksLikeText(bytes: Uint8Array): boolean {
  return !bytes.subarray(0, 8192).includes(0);
}

async function readLimited(response: Response, maxBytes: number): Promise<{ bytes: Uint8Array; cut: boolean }> {
  if (!response.body) return { bytes: new Uint8Array(), cut: false };
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  let cut = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      const room = maxBytes - size;
      if (value.byteLength > room) {
        chunks.push(value.subarray(0, room));
        size += room;
        cut = true;
        break;
      }
      chunks.push(value);
      size += value.byteLength;
    }
  } finally {
    // Stop the download: nothing past the limit is wanted.
    if (cut) await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return { bytes, cut };
}

function cutChars(text: string, maxChars: number): { text: string; cut: boolean } {
  const chars = Array.from(text);
  return chars.length > maxChars ? { text: chars.slice(0, maxChars).join(""), cut: true } : { text, cut: false };
}

class FetchRefusal extends DeerflowError {
  constructor(message: string) {
    super("web_fetch_refused", message);
    this.name = "FetchRefusal";
  }
}

/**
 * Runs `work` with a signal that aborts when the run aborts or `timeoutMs` passes on the agent's
 * clock; a timeout is reported through `timedOut`.
 */
async function withDeadline<T>(
  clock: Clock,
  timeoutMs: number,
  runSignal: AbortSignal | undefined,
  work: (signal: AbortSignal) => Promise<T>,
): Promise<{ value?: T; timedOut: boolean }> {
  const controller = new AbortController();
  const stopTimer = new AbortController();
  let timedOut = false;
  const onRunAbort = () => controller.abort(runSignal?.reason);
  if (runSignal?.aborted) controller.abort(runSignal.reason);
  runSignal?.addEventListener("abort", onRunAbort, { once: true });
  clock.sleep(timeoutMs, stopTimer.signal).then(
    () => {
      timedOut = true;
      controller.abort(new DOMException("The web request timed out.", "TimeoutError"));
    },
    () => undefined,
  );
  try {
    return { value: await work(controller.signal), timedOut: false };
  } catch (error) {
    if (timedOut && !runSignal?.aborted) return { timedOut: true };
    throw error;
  } finally {
    stopTimer.abort();
    runSignal?.removeEventListener("abort", onRunAbort);
  }
}

function errorMessageResult(context: ToolContext, name: string, text: string): ToolMessage {
  return new ToolMessage({ content: `Error: ${text}`, tool_call_id: context.toolCall.id ?? "", name, status: "error" });
}

export function createWebFetchTool(config?: Partial<WebFetchConfig> | null, deps: WebToolDeps = {}): AgentTool {
  const settings = parseConfig(WebFetchConfigSchema, config, WEB_FETCH_TOOL_NAME);
  const fetchImpl = deps.fetch ?? globalThis.fetch.bind(globalThis);

  async function checkUrl(url: URL): Promise<void> {
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw new FetchRefusal(`web_fetch only reads http and https URLs, not ${url.protocol.replace(/:$/, "")}.`);
    }
    if (url.username || url.password) throw new FetchRefusal("web_fetch does not send credentials embedded in a URL.");
    if (settings.allow_private_hosts) return;
    if (isPrivateHost(url.hostname)) {
      throw new FetchRefusal(`web_fetch does not access private, local or loopback addresses (${url.hostname}). Fetch a public URL instead.`);
    }
    if (deps.resolveHost && !/^[\d.]+$|^\[/.test(url.hostname)) {
      const addresses = await deps.resolveHost(url.hostname);
      if (addresses.some(isPrivateAddress)) {
        throw new FetchRefusal(`web_fetch does not access private, local or loopback addresses (${url.hostname} resolves to one). Fetch a public URL instead.`);
      }
    }
  }

  async function fetchPage(start: URL, signal: AbortSignal): Promise<{ ok: boolean; text: string }> {
    let url = start;
    for (let hop = 0; ; hop++) {
      await checkUrl(url);
      const response = await fetchImpl(url.href, {
        method: "GET",
        redirect: "manual",
        signal,
        headers: { "user-agent": settings.user_agent, accept: "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5" },
      });
      if (REDIRECT_STATUSES.has(response.status)) {
        await response.body?.cancel().catch(() => undefined);
        const location = response.headers.get("location");
        if (!location) throw new FetchRefusal(`${url.href} answered HTTP ${response.status} without a Location to follow.`);
        if (hop >= settings.max_redirects) throw new FetchRefusal(`${start.href} redirected more than ${settings.max_redirects} times.`);
        url = new URL(location, url);
        continue;
      }
      if (response.type === "opaqueredirect") throw new FetchRefusal(`${url.href} redirects, and this runtime hides where to.`);
      if (!response.ok) {
        await response.body?.cancel().catch(() => undefined);
        return { ok: false, text: `HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ""} from ${url.href}` };
      }
      const contentType = response.headers.get("content-type");
      const type = mediaType(contentType);
      if (type !== "" && !type.startsWith("text/") && !TEXT_TYPES.has(type)) {
        await response.body?.cancel().catch(() => undefined);
        throw new FetchRefusal(`${url.href} is ${type}; web_fetch reads web pages and text only.`);
      }
      const { bytes, cut: bodyCut } = await readLimited(response, settings.max_bytes);
      if (type === "" && !looksLikeText(bytes)) throw new FetchRefusal(`${url.href} returned binary content; web_fetch reads web pages and text only.`);
      const raw = decodeBody(bytes, charsetOf(contentType));
      const isMarkup = type === "text/html" || type === "application/xhtml+xml" || (type === "" && /^\s*<(!doctype html|html)/i.test(raw));
      let page: string;
      if (isMarkup) {
        const { title, text } = htmlToText(raw, url.href);
        page = title ? `# ${title}\n\n${text}` : text;
      } else {
        page = raw.trim();
      }
      const { text, cut } = cutChars(page, settings.max_chars);
      if (text === "") return { ok: true, text: `The page at ${url.href} has no readable text.` };
      return { ok: true, text: cut || bodyCut ? `${text}\n\n[Page cut at ${cut ? `${settings.max_chars} characters` : `${settings.max_bytes} bytes`}.]` : text };
    }
  }

  return Object.freeze({
    name: WEB_FETCH_TOOL_NAME,
    description: [
      "Fetch the contents of a web page at a given URL and return its readable text.",
      "Only fetch exact URLs the user gave or that web_search / web_fetch results contained.",
      "Pages behind a login cannot be read. The URL must include the scheme: https://example.com, not example.com.",
    ].join("\n"),
    schema: {
      type: "object",
      properties: { url: { type: "string", description: "The http(s) URL to fetch." } },
      required: ["url"],
    },
    metadata: Object.freeze({ source: "builtin" }),
    async invoke(args: Record<string, unknown>, context: ToolContext): Promise<ToolOutput> {
      const raw = typeof args["url"] === "string" ? args["url"].trim() : "";
      let url: URL;
      try {
        url = new URL(raw);
      } catch {
        return errorMessageResult(context, WEB_FETCH_TOOL_NAME, `"${raw}" is not a valid URL; include the scheme, e.g. https://example.com.`);
      }
      try {
        const { value, timedOut } = await withDeadline(context.runtime.services.clock, settings.timeout * 1000, context.runtime.signal, (signal) =>
          fetchPage(url, signal),
        );
        if (timedOut) return errorMessageResult(context, WEB_FETCH_TOOL_NAME, `fetching ${url.href} timed out after ${settings.timeout} s.`);
        return value!.ok ? value!.text : errorMessageResult(context, WEB_FETCH_TOOL_NAME, value!.text);
      } catch (error) {
        rethrowIfControlFlow(error, context.runtime);
        if (error instanceof FetchRefusal) return errorMessageResult(context, WEB_FETCH_TOOL_NAME, error.message);
        return errorMessageResult(context, WEB_FETCH_TOOL_NAME, `fetching ${url.href} failed: network error (${errorMessage(error)}).`);
      }
    },
  });
}

// ---------------------------------------------------------------------------------------------
// web_search

export function createWebSearchTool(config: Partial<WebSearchConfig> | null | undefined, deps: { readonly provider: WebSearchProvider }): AgentTool {
  const settings = parseConfig(WebSearchConfigSchema, config, WEB_SEARCH_TOOL_NAME);
  const { provider } = deps;
  return Object.freeze({
    name: WEB_SEARCH_TOOL_NAME,
    description: "Search the web. Returns a JSON list of results with title, url and snippet.",
    schema: {
      type: "object",
      properties: { query: { type: "string", description: "The query to search for." } },
      required: ["query"],
    },
    metadata: Object.freeze({ source: "builtin", search_provider: provider.name }),
    async invoke(args: Record<string, unknown>, context: ToolContext): Promise<ToolOutput> {
      const query = typeof args["query"] === "string" ? args["query"].trim() : "";
      if (query === "") return errorMessageResult(context, WEB_SEARCH_TOOL_NAME, "the query is empty; say what to search for.");
      try {
        const { value, timedOut } = await withDeadline(context.runtime.services.clock, settings.timeout * 1000, context.runtime.signal, (signal) =>
          provider.search(query, { maxResults: settings.max_results, signal }),
        );
        if (timedOut) return errorMessageResult(context, WEB_SEARCH_TOOL_NAME, `the search timed out after ${settings.timeout} s.`);
        const results = (value ?? []).slice(0, settings.max_results).map((r) => ({ title: r.title, url: r.url, snippet: r.snippet }));
        if (results.length === 0) return `No results found for: ${query}`;
        return JSON.stringify(results, null, 2);
      } catch (error) {
        rethrowIfControlFlow(error, context.runtime);
        return errorMessageResult(context, WEB_SEARCH_TOOL_NAME, `the ${provider.name} search failed: ${errorMessage(error)}`);
      }
    },
  });
}

/** Tavily's search API over fetch; `baseUrl` is for tests and proxies. */
export function createTavilySearchProvider(options: { readonly apiKey: string; readonly baseUrl?: string; readonly fetch?: typeof fetch }): WebSearchProvider {
  const fetchImpl = options.fetch ?? globalThis.fetch.bind(globalThis);
  const endpoint = new URL("search", `${(options.baseUrl ?? "https://api.tavily.com").replace(/\/+$/, "")}/`).href;
  return {
    name: "tavily",
    async search(query, { maxResults, signal }) {
      const response = await fetchImpl(endpoint, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${options.apiKey}` },
        body: JSON.stringify({ query, max_results: maxResults }),
        ...(signal ? { signal } : {}),
      });
      if (!response.ok) {
        await response.body?.cancel().catch(() => undefined);
        throw new DeerflowError("web_search_failed", `HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ""} from Tavily; check the API key and quota.`);
      }
      const body = (await response.json()) as { results?: Array<{ title?: unknown; url?: unknown; content?: unknown }> };
      return (Array.isArray(body.results) ? body.results : []).map((r) => ({
        title: String(r.title ?? ""),
        url: String(r.url ?? ""),
        snippet: String(r.content ?? ""),
      }));
    },
  };
}

export interface WebToolsOptions extends WebToolDeps {
  /** A provider in code wins over `web_search.provider`. */
  readonly searchProvider?: WebSearchProvider;
  /** Where `web_search.api_key_env` is read. */
  readonly env?: Env;
}

/**
 * web_fetch, plus web_search when a provider is given or configured. A configured provider whose
 * key is missing fails here, at assembly, rather than on the model's first search.
 */
export function createWebTools(
  config: { readonly web_fetch?: Partial<WebFetchConfig> | null; readonly web_search?: Partial<WebSearchConfig> | null } = {},
  options: WebToolsOptions = {},
): AgentTool[] {
  const tools = [createWebFetchTool(config.web_fetch, options)];
  const search = parseConfig(WebSearchConfigSchema, config.web_search, WEB_SEARCH_TOOL_NAME);
  let provider = options.searchProvider;
  if (!provider && search.provider === "tavily") {
    const apiKey = options.env?.get(search.api_key_env);
    if (!apiKey) {
      throw new DeerflowError(
        "web_search_not_configured",
        `web_search.provider is tavily but the environment variable ${search.api_key_env} is not set. Set it, or remove web_search.provider to run without web search.`,
      );
    }
    provider = createTavilySearchProvider({ apiKey, ...(search.base_url ? { baseUrl: search.base_url } : {}), ...(options.fetch ? { fetch: options.fetch } : {}) });
  }
  if (provider) tools.push(createWebSearchTool(config.web_search, { provider }));
  return tools;
}
