import { ToolMessage } from "@langchain/core/messages";
import { isGraphBubbleUp } from "@langchain/langgraph/web";
import * as v from "valibot";
import type { Assert, SameType } from "../core/types.ts";
import { DeerflowError, errorMessage } from "../core/errors.ts";
import type { AgentRuntime, AgentTool, ToolContext, ToolOutput } from "../engine/types.ts";
import type { Clock, Env } from "../ports/runtime-ports.ts";
import { isPrivateAddress, isPrivateHost } from "./web-hosts.ts";
import { htmlToText } from "./web-html.ts";

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
