import * as v from "valibot";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import type { ToolCall } from "@langchain/core/messages/tool";
import { fakeModel } from "@langchain/core/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock, systemClock } from "../../../src/core/clock.ts";
import { createAgent } from "../../../src/engine/agent.ts";
import type { AgentTool, ToolContext } from "../../../src/engine/types.ts";
import { emptyThreadState } from "../../../src/state/thread-state.ts";
import {
  WebFetchConfigSchema,
  createTavilySearchProvider,
  createWebFetchTool,
  createWebSearchTool,
  createWebTools,
  type WebSearchProvider,
} from "../../../src/tools/web.ts";
import { isPrivateAddress, isPrivateHost } from "../../../src/tools/web-hosts.ts";
import { htmlToText } from "../../../src/tools/web-html.ts";
import { makeRuntime } from "../../middlewares/runtime.ts";

// The section as its schema fills it in when nothing is configured.
const WEB_FETCH_DEFAULTS = v.parse(WebFetchConfigSchema, {});

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

const PAGE = `<!doctype html><html><head><title>Deer &amp; Flow</title><style>.x{color:red}</style>
<script>alert("hidden")</script></head><body><nav><a href="/home">Home</a></nav>
<article><h1>Guide</h1><p>Read the <a href="/docs/start">getting started</a> page &mdash; it&#39;s short.</p>
<ul><li>one</li><li>two</li></ul><pre><code>npm   install
  deerflow</code></pre><!-- a comment --></article><footer>© footer</footer></body></html>`;

const routes: Record<string, Handler> = {
  "/page": (_req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end(PAGE);
  },
  "/text": (_req, res) => {
    res.writeHead(200, { "content-type": "text/plain" });
    res.end("plain text body");
  },
  "/json": (_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end('{"a": 1}');
  },
  "/latin1": (_req, res) => {
    res.writeHead(200, { "content-type": "text/plain; charset=iso-8859-1" });
    res.end(Buffer.from([0x63, 0x61, 0x66, 0xe9]));
  },
  "/image": (_req, res) => {
    res.writeHead(200, { "content-type": "image/png" });
    res.end(Buffer.from([0x89, 0x50, 0x4e, 0x47]));
  },
  "/binary": (_req, res) => {
    res.writeHead(200);
    res.end(Buffer.from([0x00, 0x01, 0x02, 0x00]));
  },
  "/missing": (_req, res) => {
    res.writeHead(404, "Not Found", { "content-type": "text/html" });
    res.end("<h1>nope</h1>");
  },
  "/big": (_req, res) => {
    res.writeHead(200, { "content-type": "text/plain" });
    res.end("x".repeat(100_000));
  },
  "/redirect": (_req, res) => {
    res.writeHead(302, { location: "/text" });
    res.end();
  },
  "/loop": (_req, res) => {
    res.writeHead(301, { location: "/loop" });
    res.end();
  },
  "/hang": () => {
    // Never answers: only the deadline (or the run's abort) ends the fetch.
  },
  "/search": (req, res, body) => {
    searchRequests.push({ authorization: req.headers.authorization, body: JSON.parse(body) });
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ results: [{ title: "DeerFlow", url: "https://deerflow.tech", content: "An agent harness.", score: 0.9 }] }));
  },
};

let server: Server;
let base: string;
let hits: string[] = [];
const searchRequests: Array<{ authorization: string | undefined; body: unknown }> = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => (body += chunk.toString()));
    req.on("end", () => {
      const path = new URL(req.url ?? "/", "http://x").pathname;
      hits.push(path);
      const route = routes[path];
      if (route) route(req, res, body);
      else {
        res.writeHead(404);
        res.end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

function context(options: { clock?: ManualClock; signal?: AbortSignal } = {}): ToolContext {
  const toolCall: ToolCall = { name: "web_fetch", args: {}, id: "c1", type: "tool_call" };
  const runtime = makeRuntime({ ...(options.signal ? { signal: options.signal } : {}), ...(options.clock ? { services: { clock: options.clock } } : {}) });
  return { toolCall, state: emptyThreadState(), runtime };
}

const loopbackFetch = (config: Record<string, unknown> = {}) => createWebFetchTool({ allow_private_hosts: true, ...config });

async function fetchText(tool: AgentTool, url: string, ctx = context()): Promise<{ text: string; error: boolean }> {
  const out = await tool.invoke({ url }, ctx);
  if (typeof out === "string") return { text: out, error: false };
  const message = out as ToolMessage;
  return { text: message.content as string, error: message.status === "error" };
}

describe("web_fetch", () => {
  it("turns an HTML page into readable Markdown-flavoured text: title, headings, absolute links, lists, fenced code; no scripts or chrome", async () => {
    const { text, error } = await fetchText(loopbackFetch(), `${base}/page`);
    expect(error).toBe(false);
    expect(text).toBe(
      [
        "# Deer & Flow",
        "",
        "# Guide",
        "",
        `Read the [getting started](${base}/docs/start) page — it's short.`,
        "",
        "- one",
        "- two",
        "",
        "```",
        "npm   install",
        "  deerflow",
        "```",
      ].join("\n"),
    );
  });

  it("returns text, JSON and other charsets as they are", async () => {
    const tool = loopbackFetch();
    expect((await fetchText(tool, `${base}/text`)).text).toBe("plain text body");
    expect((await fetchText(tool, `${base}/json`)).text).toBe('{"a": 1}');
    expect((await fetchText(tool, `${base}/latin1`)).text).toBe("café");
  });

  it("refuses loopback and private hosts unless the config allows them, without sending a request", async () => {
    hits = [];
    const result = await fetchText(createWebFetchTool(), `${base}/page`);
    expect(result.error).toBe(true);
    expect(result.text).toBe("Error: web_fetch does not access private, local or loopback addresses (127.0.0.1). Fetch a public URL instead.");
    expect(hits).toEqual([]);
    expect(WEB_FETCH_DEFAULTS.allow_private_hosts).toBe(false);
  });

  it("refuses other schemes, credentials in the URL and text that is no URL", async () => {
    const tool = loopbackFetch();
    expect(await fetchText(tool, "file:///etc/passwd")).toEqual({ text: "Error: web_fetch only reads http and https URLs, not file.", error: true });
    expect((await fetchText(tool, `http://user:pw@127.0.0.1:1/`)).text).toBe("Error: web_fetch does not send credentials embedded in a URL.");
    expect((await fetchText(tool, "example.com")).text).toBe('Error: "example.com" is not a valid URL; include the scheme, e.g. https://example.com.');
  });

  it("reads only text content types", async () => {
    const tool = loopbackFetch();
    expect(await fetchText(tool, `${base}/image`)).toEqual({ text: `Error: ${base}/image is image/png; web_fetch reads web pages and text only.`, error: true });
    expect((await fetchText(tool, `${base}/binary`)).text).toBe(`Error: ${base}/binary returned binary content; web_fetch reads web pages and text only.`);
  });

  it("reports HTTP errors as errors the result classifier reads", async () => {
    expect(await fetchText(loopbackFetch(), `${base}/missing`)).toEqual({ text: `Error: HTTP 404 Not Found from ${base}/missing`, error: true });
  });

  it("stops reading at max_bytes and hands over at most max_chars", async () => {
    const bytes = await fetchText(loopbackFetch({ max_bytes: 1000, max_chars: 5000 }), `${base}/big`);
    expect(bytes.text).toBe(`${"x".repeat(1000)}\n\n[Page cut at 1000 bytes.]`);
    const chars = await fetchText(loopbackFetch({ max_chars: 10 }), `${base}/big`);
    expect(chars.text).toBe(`${"x".repeat(10)}\n\n[Page cut at 10 characters.]`);
  });

  it("follows redirects, re-checking each hop, up to max_redirects", async () => {
    expect((await fetchText(loopbackFetch(), `${base}/redirect`)).text).toBe("plain text body");
    expect((await fetchText(loopbackFetch({ max_redirects: 3 }), `${base}/loop`)).text).toBe(`Error: ${base}/loop redirected more than 3 times.`);
    // A public page that redirects into the private network is refused at the second hop.
    const requested: string[] = [];
    const publicThenPrivate: typeof fetch = async (input) => {
      requested.push(String(input));
      return new Response(null, { status: 302, headers: { location: `${base}/page` } });
    };
    const result = await fetchText(createWebFetchTool({}, { fetch: publicThenPrivate }), "https://public.example/start");
    expect(result.text).toBe("Error: web_fetch does not access private, local or loopback addresses (127.0.0.1). Fetch a public URL instead.");
    expect(requested).toEqual(["https://public.example/start"]);
  });

  it("refuses a name that resolves into a private network when a resolver is given", async () => {
    const tool = createWebFetchTool({}, { resolveHost: async () => ["10.0.0.7"], fetch: async () => new Response("secret") });
    expect((await fetchText(tool, "https://intranet.example/")).text).toContain("(intranet.example resolves to one)");
  });

  it("times out on the agent's clock", async () => {
    const clock = new ManualClock(0);
    const pending = fetchText(loopbackFetch({ timeout: 5 }), `${base}/hang`, context({ clock }));
    await expect.poll(() => clock.pendingSleeps).toBe(1);
    await clock.advance(5000);
    expect(await pending).toEqual({ text: `Error: fetching ${base}/hang timed out after 5 s.`, error: true });
  });

  it("rethrows when the run is aborted", async () => {
    const controller = new AbortController();
    const pending = fetchText(loopbackFetch(), `${base}/hang`, context({ signal: controller.signal }));
    await expect.poll(() => hits.includes("/hang")).toBe(true);
    controller.abort(new Error("stop"));
    await expect(pending).rejects.toThrow();
  });

  it("runs inside the engine as the model calls it", async () => {
    const model = fakeModel()
      .respondWithTools([{ name: "web_fetch", args: { url: `${base}/text` }, id: "c1" }])
      .respond(new AIMessage("read it"));
    const agent = createAgent({ model, tools: [loopbackFetch()], services: { clock: systemClock } });
    const final = await agent.invoke({ messages: [new HumanMessage({ content: "read", id: "m1" })] }, { threadId: "t1" });
    const result = final.messages.find((m): m is ToolMessage => m.type === "tool");
    expect(result).toMatchObject({ name: "web_fetch", content: "plain text body", tool_call_id: "c1" });
  });
});

describe("private host checks", () => {
  it.each([
    "localhost", "app.localhost", "printer.local", "metadata.google.internal", "127.0.0.1", "10.1.2.3", "172.16.0.1", "172.31.255.255",
    "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "224.0.0.1", "255.255.255.255", "[::1]", "[::]", "[fd00::1]", "[fe80::1]",
    "[::ffff:7f00:1]", "[::ffff:10.0.0.1]", "[64:ff9b::a00:1]", "[2002:c0a8:101::1]",
  ])("%s is private", (host) => {
    expect(isPrivateHost(host)).toBe(true);
  });

  it.each(["example.com", "8.8.8.8", "172.32.0.1", "100.128.0.1", "[2606:4700::1111]", "[::ffff:808:808]"])("%s is public", (host) => {
    expect(isPrivateHost(host)).toBe(false);
  });

  it("reads URL-normalized hosts (octal, hex and decimal IPv4 forms become dotted)", () => {
    for (const url of ["http://0x7f.1/", "http://2130706433/", "http://017700000001/", "http://[::ffff:127.0.0.1]/"]) {
      expect(isPrivateHost(new URL(url).hostname)).toBe(true);
    }
    expect(isPrivateAddress("not-an-address")).toBe(false);
  });
});

describe("htmlToText", () => {
  it("decodes numeric entities, drops empty links and keeps image alt text", () => {
    expect(htmlToText('<p>A&#x27;s &#169; <a href="javascript:x()">js</a> <a href="/x"></a><img src="a.png" alt="chart"></p>', "https://e.example/").text).toBe(
      "A's © js chart",
    );
  });
});

describe("web_search", () => {
  const provider = (results: Awaited<ReturnType<WebSearchProvider["search"]>>, seen: unknown[] = []): WebSearchProvider => ({
    name: "fake",
    async search(query, options) {
      seen.push({ query, maxResults: options.maxResults });
      return results;
    },
  });

  it("is absent without a provider and present with one", () => {
    expect(createWebTools().map((t) => t.name)).toEqual(["web_fetch"]);
    expect(createWebTools({}, { searchProvider: provider([]) }).map((t) => t.name)).toEqual(["web_fetch", "web_search"]);
  });

  it("returns the provider's results as JSON, capped at max_results", async () => {
    const seen: unknown[] = [];
    const many = Array.from({ length: 4 }, (_, i) => ({ title: `t${i}`, url: `https://r${i}.example`, snippet: `s${i}` }));
    const tool = createWebSearchTool({ max_results: 2 }, { provider: provider(many, seen) });
    const out = await tool.invoke({ query: " deer " }, context());
    expect(JSON.parse(out as string)).toEqual(many.slice(0, 2));
    expect(seen).toEqual([{ query: "deer", maxResults: 2 }]);
    expect(await tool.invoke({ query: "x" }, context()).then((o) => o)).toBe(JSON.stringify(many.slice(0, 2), null, 2));
  });

  it("says when nothing was found, and turns a provider failure into an error result", async () => {
    expect(await createWebSearchTool({}, { provider: provider([]) }).invoke({ query: "zzz" }, context())).toBe("No results found for: zzz");
    const failing: WebSearchProvider = {
      name: "fake",
      async search() {
        throw new Error("429 rate limit exceeded");
      },
    };
    const out = (await createWebSearchTool({}, { provider: failing }).invoke({ query: "q" }, context())) as ToolMessage;
    expect(out).toMatchObject({ content: "Error: the fake search failed: 429 rate limit exceeded", status: "error" });
  });

  it("uses Tavily when configured, with the key from the environment", async () => {
    const tools = createWebTools(
      { web_search: { provider: "tavily", base_url: base, max_results: 3 } },
      { env: { get: (name) => (name === "TAVILY_API_KEY" ? "tvly-key" : undefined) } },
    );
    const search = tools.find((t) => t.name === "web_search")!;
    const out = await search.invoke({ query: "deerflow" }, context());
    expect(JSON.parse(out as string)).toEqual([{ title: "DeerFlow", url: "https://deerflow.tech", snippet: "An agent harness." }]);
    expect(searchRequests.at(-1)).toEqual({ authorization: "Bearer tvly-key", body: { query: "deerflow", max_results: 3 } });
    expect(createTavilySearchProvider({ apiKey: "k" }).name).toBe("tavily");
  });

  it("fails at assembly when a configured provider has no key", () => {
    expect(() => createWebTools({ web_search: { provider: "tavily" } }, { env: { get: () => undefined } })).toThrow(
      expect.objectContaining({ code: "web_search_not_configured" }),
    );
    expect(() => createWebFetchTool({ timeout: -1 })).toThrow(/web_fetch\.timeout/);
  });
});
