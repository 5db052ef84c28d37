import { ToolMessage } from "@langchain/core/messages";
import { describe, expect, it } from "vitest";
import {
  TOOL_META_KEY,
  classifyToolError,
  normalizeToolResult,
  stampExceptionMeta,
  stampToolMeta,
  type ToolResultMeta,
} from "../../src/middlewares/tool-result-meta.ts";

function msg(content: ToolMessage["content"], options: { status?: "success" | "error"; name?: string; kwargs?: Record<string, unknown> } = {}) {
  return new ToolMessage({
    content,
    tool_call_id: "tc-1",
    name: options.name ?? "test_tool",
    status: options.status ?? "success",
    additional_kwargs: options.kwargs ?? {},
  });
}

function metaOf(message: ToolMessage): ToolResultMeta {
  return message.additional_kwargs[TOOL_META_KEY] as ToolResultMeta;
}

function stamped(content: string, options: Parameters<typeof msg>[1] = {}): ToolResultMeta {
  return metaOf(stampToolMeta(msg(content, options)));
}

const SUCCESS: ToolResultMeta = {
  status: "success",
  error_type: null,
  recoverable_by_model: true,
  recommended_next_action: "continue",
  source: "content_analysis",
};

function shell(errorType: ToolResultMeta["error_type"], recoverable: boolean, action: ToolResultMeta["recommended_next_action"]): ToolResultMeta {
  return { status: "error", error_type: errorType, recoverable_by_model: recoverable, recommended_next_action: action, source: "content_analysis" };
}

describe("scenario M30: normalized meta of typical tool returns", () => {
  it("classifies 'Error: 401 Unauthorized' as auth / stop", () => {
    expect(stamped("Error: 401 Unauthorized")).toEqual({
      status: "error",
      error_type: "auth",
      recoverable_by_model: false,
      recommended_next_action: "stop",
      source: "tool_return",
    });
  });

  it('treats {"error":"none","results":[1]} as success', () => {
    expect(stamped('{"error":"none","results":[1]}')).toEqual(SUCCESS);
  });

  it('classifies {"error":"rate limit exceeded"} as rate_limited / summarize', () => {
    expect(stamped('{"error":"rate limit exceeded"}')).toEqual({
      status: "error",
      error_type: "rate_limited",
      recoverable_by_model: false,
      recommended_next_action: "summarize",
      source: "tool_return",
    });
  });

  it("treats 'done in 500ms' as success (500 only matches as a whole word)", () => {
    expect(stamped("done in 500ms")).toEqual(SUCCESS);
  });
});

describe("stampToolMeta", () => {
  it("keeps meta a producer already stamped", () => {
    const existing = { status: "success", source: "custom" };
    const message = msg("hello", { kwargs: { [TOOL_META_KEY]: existing } });
    expect(stampToolMeta(message).additional_kwargs[TOOL_META_KEY]).toBe(existing);
  });

  it("keeps the other additional_kwargs and returns the same message", () => {
    const message = msg("ok", { kwargs: { other: 1 } });
    const result = stampToolMeta(message);
    expect(result).toBe(message);
    expect(result.additional_kwargs["other"]).toBe(1);
  });

  it("serialises the stamped meta with the message", () => {
    const message = stampToolMeta(msg("Error: file not found"));
    const json = JSON.parse(JSON.stringify(message)) as { kwargs: { additional_kwargs: Record<string, unknown> } };
    expect(json.kwargs.additional_kwargs[TOOL_META_KEY]).toMatchObject({ error_type: "not_found" });
  });
});

describe("Error: prefix (tool_return)", () => {
  it.each([
    ["Error: 401 unauthorized", "auth"],
    ["Error: permission denied for path", "permission"],
    ["Error: 429 rate limit exceeded", "rate_limited"],
    ["Error: connection timeout", "transient"],
    ["Error: tool not configured", "config"],
    ["Error: no results found for query", "no_results"],
    ["Error: file not found", "not_found"],
    ["Error: internal error 500", "internal"],
    ["Error: something completely unexpected happened", "unknown"],
  ])("%s -> %s", (content, expected) => {
    const meta = stamped(content, { status: "error" });
    expect(meta.status).toBe("error");
    expect(meta.error_type).toBe(expected);
    expect(meta.source).toBe("tool_return");
  });

  it("auth errors are not recoverable and say stop", () => {
    const meta = stamped("Error: invalid api key", { status: "error" });
    expect(meta.recoverable_by_model).toBe(false);
    expect(meta.recommended_next_action).toBe("stop");
  });

  it("a missing api key is config, not auth", () => {
    const meta = stamped("Error: no api key configured", { status: "error" });
    expect(meta.error_type).toBe("config");
    expect(meta.recommended_next_action).toBe("stop");
    expect(meta.recoverable_by_model).toBe(false);
  });

  it("rate limited suggests summarize", () => {
    const meta = stamped("Error: rate limited", { status: "error" });
    expect(meta.recommended_next_action).toBe("summarize");
    expect(meta.recoverable_by_model).toBe(false);
  });

  it("no results suggests rewriting the query", () => {
    const meta = stamped("Error: no results found", { status: "error" });
    expect(meta.recoverable_by_model).toBe(true);
    expect(meta.recommended_next_action).toBe("rewrite_query");
  });

  it("applies to a success-status message too", () => {
    expect(stamped("Error: file not found").status).toBe("error");
  });

  it("the first matching rule wins (auth before not_found)", () => {
    expect(stamped("Error: 403 forbidden, file not found").error_type).toBe("auth");
  });
});

describe("status=error without the Error: prefix", () => {
  it("classifies plain text from the content", () => {
    const meta = stamped("ConnectionError: connection refused", { status: "error" });
    expect(meta).toMatchObject({ status: "error", source: "tool_return", error_type: "transient" });
  });

  it("classifies 'timeout occurred' as transient", () => {
    expect(stamped("timeout occurred", { status: "error" }).error_type).toBe("transient");
  });

  it("uses only the JSON error field, never other fields", () => {
    const meta = stamped('{"error": "api limit exceeded", "query": "connection test timeout"}', { status: "error" });
    expect(meta).toMatchObject({ status: "error", source: "tool_return", error_type: "unknown" });
  });

  it("a JSON object without an error key is unknown", () => {
    expect(stamped('{"message": "connection refused"}', { status: "error" }).error_type).toBe("unknown");
  });

  it("a 401 in an unrelated JSON field does not say stop", () => {
    const meta = stamped('{"user_id": 401, "action": "login"}', { status: "error" });
    expect(meta.error_type).toBe("unknown");
    expect(meta.recommended_next_action).not.toBe("stop");
  });

  it("non-JSON text is still classified", () => {
    expect(stamped("connection refused: remote host unreachable", { status: "error" }).error_type).toBe("transient");
  });

  it("a structured error value is serialised as JSON before classification", () => {
    const content = JSON.stringify({ error: [{ loc: ["body"], msg: "missing required field" }] });
    expect(stamped(content, { status: "error" })).toMatchObject({ status: "error", error_type: "config" });
  });
});

describe("JSON error field on a success-status message", () => {
  it("config error", () => {
    expect(stamped('{"error": "BRAVE_SEARCH_API_KEY is not configured", "query": "test"}')).toMatchObject({
      status: "error",
      error_type: "config",
      source: "tool_return",
    });
  });

  it("no results", () => {
    expect(stamped('{"error": "No results found", "query": "test"}')).toMatchObject({
      status: "error",
      error_type: "no_results",
      recoverable_by_model: true,
    });
  });

  it("leading whitespace still parses", () => {
    expect(stamped('  {"error": "No results found", "query": "test"}')).toMatchObject({ status: "error", error_type: "no_results" });
  });

  it("a numeric error is classified from its JSON text", () => {
    expect(stamped('{"error": 404, "query": "test"}')).toMatchObject({ status: "error", error_type: "not_found" });
  });

  it("true is an error without detail (unknown)", () => {
    expect(stamped('{"error": true, "query": "test"}')).toMatchObject({
      status: "error",
      error_type: "unknown",
      recoverable_by_model: true,
      recommended_next_action: "try_alternative",
    });
  });

  it.each(['{"error": null, "query": "test"}', '{"error": 0}', '{"error": false}', '{"error": []}', '{"error": {}}', '{"error": "broken json'])(
    "%s is not an error",
    (content) => {
      expect(stamped(content).status).not.toBe("error");
    },
  );

  it("a JSON result without an error key is success", () => {
    expect(stamped('{"results": [{"title": "page one", "url": "https://example.com/one"}], "total": 1}').status).toBe("success");
  });

  it.each(["none", "None", "NONE", "null", "Null", "false", "False", "no", "ok", "success", "n/a", "", " none "])(
    "error=%j means no error",
    (value) => {
      expect(stamped(JSON.stringify({ error: value, results: ["a", "b"] })).status).not.toBe("error");
    },
  );
});

describe("partial and success", () => {
  it.each(["no results found", "No Content Found here", "no images found for query"])("'%s' is partial_success", (content) => {
    expect(stamped(content)).toMatchObject({ status: "partial_success", recommended_next_action: "rewrite_query", error_type: null });
  });

  it.each(["partial results available", "limited results returned", "truncated output", "results may be incomplete"])(
    "a '%s' marker is partial_success",
    (marker) => {
      expect(stamped(`Here are some ${marker} from the search.`)).toMatchObject({
        status: "partial_success",
        recommended_next_action: "rewrite_query",
        source: "content_analysis",
      });
    },
  );

  it("a terse OK is success", () => {
    expect(stamped("Ok.")).toEqual(SUCCESS);
  });

  it("empty content is success", () => {
    expect(stamped("")).toEqual(SUCCESS);
  });

  it("substantial content is success", () => {
    expect(stamped("A".repeat(200))).toEqual(SUCCESS);
  });

  it("content blocks are joined and analysed as text", () => {
    const message = msg([
      { type: "text", text: "Error: HTTP 404" },
      { type: "text", text: "page" },
    ]);
    expect(metaOf(stampToolMeta(message))).toMatchObject({ status: "error", error_type: "not_found", source: "tool_return" });
  });
});

describe("numeric keywords match whole words only", () => {
  it.each([
    ["Error: HTTP 500 Internal Server Error", "internal"],
    ["Error: returned status 500", "internal"],
    ["Error: 401 Unauthorized", "auth"],
    ["Error: 404 Not Found", "not_found"],
    ["Error: took 500ms to respond", "unknown"],
    ["Error: query returned 4010 rows", "unknown"],
    ["Error: batch 401A failed", "unknown"],
    ["Error: response contained 5000 items", "unknown"],
    ["Error: code 404é", "unknown"],
  ])("%s -> %s", (content, expected) => {
    expect(stamped(content, { status: "error" }).error_type).toBe(expected);
  });
});

describe("classifyToolError", () => {
  it("returns a fresh object each call", () => {
    const first = classifyToolError("404");
    first.error_type = "auth";
    expect(classifyToolError("404").error_type).toBe("not_found");
  });

  it("falls back to unknown / recoverable / try_alternative", () => {
    expect(classifyToolError("boom")).toEqual({ error_type: "unknown", recoverable_by_model: true, recommended_next_action: "try_alternative" });
  });
});

describe("stampExceptionMeta", () => {
  it("classifies from the exception text, not the content", () => {
    const meta = metaOf(stampExceptionMeta(msg("Error: no results found", { status: "error" }), "ConnectionError: connection refused"));
    expect(meta).toMatchObject({ source: "exception", error_type: "transient", status: "error" });
  });

  it("overwrites existing meta", () => {
    const message = msg("Error: no results found", { status: "error", kwargs: { [TOOL_META_KEY]: { source: "tool_return", error_type: "unknown" } } });
    expect(metaOf(stampExceptionMeta(message, "PermissionError: access denied"))).toMatchObject({ source: "exception", error_type: "permission" });
  });

  it("keeps the other additional_kwargs", () => {
    const message = stampExceptionMeta(msg("x", { status: "error", kwargs: { subagent_status: "running" } }), "TimeoutError: timed out");
    expect(message.additional_kwargs["subagent_status"]).toBe("running");
    expect(message.additional_kwargs[TOOL_META_KEY]).toBeDefined();
  });
});

describe("scenario M31: web_fetch error pages are errors, documents are not", () => {
  it("'# 404 Not Found' is error / not_found", () => {
    expect(stamped("# 404 Not Found\n\n---\n\nnginx/1.24.0", { name: "web_fetch" })).toEqual(shell("not_found", true, "rewrite_query"));
  });

  it("'# 404 Ways to Cook Rice' is success", () => {
    expect(stamped("# 404 Ways to Cook Rice\n\nRice is a staple.", { name: "web_fetch" })).toEqual(SUCCESS);
  });

  it.each([
    ["# 404 Not Found", "not_found", true, "rewrite_query"],
    ["# Page not found", "not_found", true, "rewrite_query"],
    ["# Not Found", "not_found", true, "rewrite_query"],
    ["# 404 - File or directory not found.", "not_found", true, "rewrite_query"],
    ["# HTTP Error 404 - Not Found", "not_found", true, "rewrite_query"],
    ["# 403 Forbidden", "permission", true, "try_alternative"],
    ["# Access Denied", "permission", true, "try_alternative"],
    ["# Permission denied", "permission", true, "try_alternative"],
    ["# 401 Unauthorized", "auth", false, "stop"],
    ["# 407 Proxy Authentication Required", "auth", false, "stop"],
    ["# 429 Too Many Requests", "rate_limited", false, "summarize"],
    ["# 500 Internal Server Error", "internal", false, "stop"],
    ["# 501 Not Implemented", "internal", false, "stop"],
    ["# 502 Bad Gateway", "transient", false, "try_alternative"],
    ["# 503 Service Unavailable", "transient", false, "try_alternative"],
    ["# 503 Service Temporarily Unavailable", "transient", false, "try_alternative"],
    ["# 504 Gateway Timeout", "transient", false, "try_alternative"],
  ] as const)("title %s -> %s", (title, type, recoverable, action) => {
    expect(stamped(`${title}\n\n---\n\nnginx/1.24.0`, { name: "web_fetch" })).toEqual(shell(type, recoverable, action));
  });

  it("body prose does not rescue an error title", () => {
    const content = "# 404 Not Found\n\nThe requested URL was not found on this server.\n\n---\n\nApache/2.4.58";
    expect(stamped(content, { name: "web_fetch" }).error_type).toBe("not_found");
  });

  it("a CRLF page is read by its first line", () => {
    expect(stamped("# 404 Not Found\r\nnginx\r\n", { name: "web_fetch" }).error_type).toBe("not_found");
  });

  it.each([
    "# 404 Ways to Cook Rice",
    "# 404 ways to improve API reliability\n\nbody",
    "# 500 Startup Ideas Worth Stealing",
    "# 403",
    "404",
    "# Not Found: a short history of the 404",
    "# The Page Not Found Problem",
    "# Forbidden Planet",
    "# Gone",
    "# HTTP Status Codes\n\nThe most common client errors are:\n\nNot Found\n\nForbidden\n\nToo Many Requests",
    "# Debugging 404s\n\nWhen a page is not found, check the router first.",
    "# Untitled",
    "# Status\n\nAll systems operational.",
    "OK",
    "",
    "   \n\n  ",
  ])("document %j stays successful", (content) => {
    expect(stamped(content, { name: "web_fetch" })).toEqual(SUCCESS);
  });

  it("a partial marker still wins on web_fetch", () => {
    expect(stamped("No results found", { name: "web_fetch" })).toMatchObject({ status: "partial_success", recommended_next_action: "rewrite_query" });
  });

  it("an existing stamp is not reclassified", () => {
    const existing = { status: "partial_success", source: "tool_return", error_type: null };
    const message = msg("# 404 Not Found", { name: "web_fetch", kwargs: { [TOOL_META_KEY]: existing } });
    expect(stampToolMeta(message).additional_kwargs[TOOL_META_KEY]).toBe(existing);
  });

  it.each(["read_file", "bash", "grep", "web_search", "test_tool"])("the same wording from %s is success", (name) => {
    for (const content of ["# 404 Not Found", "Access denied", "Not Found", "Too Many Requests"]) {
      expect(stamped(content, { name })).toEqual(SUCCESS);
    }
  });

  it("an unnamed tool message is success", () => {
    expect(normalizeToolResult({ toolName: undefined, content: "# 404 Not Found" })).toEqual(SUCCESS);
  });
});
