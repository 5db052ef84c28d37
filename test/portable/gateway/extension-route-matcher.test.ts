import { describe, expect, it } from "vitest";
import {
  canEnterExact,
  canStartWith,
  findShadow,
  honoClaims,
  honoPathFor,
  parseTemplate,
  shadows,
  templateClaim,
  type RouteClaim,
  type Segment,
} from "../../../src/gateway/route-matcher.ts";

function segmentsOf(path: string): readonly Segment[] {
  const parsed = parseTemplate(path);
  if (!parsed.ok) throw new Error(parsed.problem);
  return parsed.segments;
}

function ext(method: string, path: string): RouteClaim {
  return templateClaim(method, path, segmentsOf(path));
}

/** Whether any claim of the host route shadows the contributed one. */
function hostShadows(hostMethod: string, hostPath: string, method: string, path: string): boolean {
  return honoClaims(hostMethod, hostPath).some((owner) => shadows(owner, ext(method, path)));
}

describe("the conservative route matcher", () => {
  it.each([
    // literal = literal
    ["GET", "/api/models", "GET", "/api/models", true],
    ["GET", "/api/models", "GET", "/api/model", false],
    // a plain parameter covers literals and every typed parameter in its segment
    ["GET", "/api/threads/:thread_id", "GET", "/api/threads/search", true],
    ["GET", "/api/threads/:thread_id", "GET", "/api/threads/{n:int}", true],
    ["GET", "/api/threads/:thread_id", "GET", "/api/threads/{f:float}", true],
    ["GET", "/api/threads/:thread_id", "GET", "/api/threads/{u:uuid}", true],
    ["GET", "/api/threads/:thread_id", "GET", "/api/threads/{id}", true],
    ["GET", "/api/threads/:thread_id", "GET", "/api/threads/{id}/more", false],
    // typed host parameters cover only their own language
    ["GET", "/x/:n{[0-9]+}", "GET", "/x/{m:int}", true],
    ["GET", "/x/:n{[0-9]+}", "GET", "/x/{f:float}", false],
    ["GET", "/x/:n{[0-9]+}", "GET", "/x/{s}", false],
    ["GET", "/x/:n{[0-9]+}", "GET", "/x/12", true],
    ["GET", "/x/:n{[0-9]+}", "GET", "/x/twelve", false],
    // an unclassifiable host regex proves a shadow only over a literal it matches
    ["GET", "/x/:slug{[a-z]+}", "GET", "/x/abc", true],
    ["GET", "/x/:slug{[a-z]+}", "GET", "/x/{s}", false],
    // a trailing wildcard covers the prefix and everything below it
    ["GET", "/static/*", "GET", "/static", true],
    ["GET", "/static/*", "GET", "/static/a/b", true],
    ["GET", "/static/*", "GET", "/static/{n:int}/{rest:path}", true],
    ["GET", "/static/*", "GET", "/other/a", false],
    // optional parameters serve both shapes
    ["GET", "/o/:id?", "GET", "/o", true],
    ["GET", "/o/:id?", "GET", "/o/{x}", true],
    // methods: GET serves HEAD; ALL serves everything; otherwise disjoint methods never clash
    ["GET", "/api/models", "HEAD", "/api/models", true],
    ["GET", "/api/models", "POST", "/api/models", false],
    ["ALL", "/api/models", "DELETE", "/api/models", true],
    ["HEAD", "/api/models", "GET", "/api/models", true],
  ] as const)("host %s %s vs contributed %s %s → shadowed %s", (hostMethod, hostPath, method, path, expected) => {
    expect(hostShadows(hostMethod, hostPath, method, path)).toBe(expected);
  });

  it.each([
    ["/a/{s}", "/a/{n:int}", true],
    ["/a/{f:float}", "/a/{n:int}", true],
    ["/a/{n:int}", "/a/{f:float}", false],
    ["/a/{p:path}", "/a/{n:int}", true],
    ["/a/{p:path}", "/a/b/{u:uuid}", true],
    // a catch-all stops at a newline, a plain parameter does not: not provably covered
    ["/a/{p:path}", "/a/{s}", false],
    ["/a/{p:path}", "/a", false],
    ["/a/{u:uuid}", "/a/{s}", false],
    ["/a/{x}", "/a/{y}", true],
    // supported compound segments, compared by shape
    ["/a/{s}", "/a/v{n:int}", true],
    ["/a/{s}", "/a/{name}.{ext}", true],
    ["/a/{n:int}", "/a/{x:int}{y:int}", false],
    ["/a/v{n:int}", "/a/v{m:int}", true],
    ["/a/v{n}", "/a/v{m:int}", true],
    ["/a/v{n:int}", "/a/v{m}", false],
    ["/a/v{n:int}", "/a/v12", true],
    ["/a/v{n:int}", "/a/vx", false],
    ["/a/v{n:int}", "/a/{s}", false],
    ["/a/{name}.{ext}", "/a/{stem:uuid}.{kind:int}", true],
    ["/a/{name}.{ext}", "/a/{name}-{part}.{ext}", false],
    ["/a/{name}.{ext}", "/a/{name}.tar.gz", false],
    ["/a/{name}.{ext}", "/a/notes.txt", true],
    ["/a/{p:path}", "/a/v{n:int}", true],
    // a catch-all stops at a newline; a compound with a plain parameter can hold one
    ["/a/{p:path}", "/a/v{n}", false],
  ])("contributed %s covers %s: %s", (owner, candidate, expected) => {
    expect(shadows(ext("GET", owner), ext("GET", candidate))).toBe(expected);
  });

  it("findShadow lets a router's earlier route shadow its later one and names the holder", () => {
    const owners = [{ claim: ext("GET", "/api/models"), holder: "host" }];
    expect(findShadow([ext("GET", "/api/ext/{id}"), ext("GET", "/api/ext/latest")], owners, "acme")).toEqual({ path: "/api/ext/latest", holder: "acme" });
    expect(findShadow([ext("GET", "/api/ext/latest"), ext("GET", "/api/ext/{id}")], owners, "acme")).toBeNull();
    expect(findShadow([ext("POST", "/api/models")], owners, "acme")).toBeNull();
  });

  it("builds Hono paths that keep the converter's language", () => {
    const parsed = parseTemplate("/api/ext/{name}/{n:int}/{rest:path}");
    if (!parsed.ok) throw new Error(parsed.problem);
    expect(honoPathFor(parsed)).toBe("/api/ext/:name/:n{[0-9]+}/:rest{.+}");
    const compound = parseTemplate("/api/ext/v{n:int}/{name}.{ext}");
    if (!compound.ok) throw new Error(compound.problem);
    expect(honoPathFor(compound)).toBe("/api/ext/:seg-2{v[0-9]+}/:seg-3{[^/]+\\.[^/]+}");
  });

  it.each([
    ["GET", "/f/:name{[^/]+}", "/f/{a}.{b}", true],
    ["GET", "/f/:n{[0-9]+(?:\\.[0-9]+)?}", "/f/{n:int}", true],
    ["GET", "/f/:n{[0-9]+(?:\\.[0-9]+)?}", "/f/{s}", false],
    // A host route another mount call contributed, read back from Hono: its own pattern, matched against literals only.
    ["GET", "/f/:seg-1{v[0-9]+}", "/f/v7", true],
    ["GET", "/f/:seg-1{v[0-9]+}", "/f/v{n:int}", false],
  ] as const)("host %s %s (a converter spelled as its pattern) vs contributed %s → shadowed %s", (hostMethod, hostPath, path, expected) => {
    expect(hostShadows(hostMethod, hostPath, "GET", path)).toBe(expected);
  });

  describe("reserved prefixes", () => {
    it.each([
      ["/health", "/health", true],
      ["/healthz", "/health", true],
      ["/{anything}", "/health", true],
      ["/{n:int}", "/health", false],
      ["/api/v1/{section}/login", "/api/v1/auth/", true],
      ["/api/{rest:path}", "/api/webhooks/", true],
      ["/api/{s}", "/api/webhooks/", false],
      ["/api/{s}/x", "/api/webhooks/", true],
      ["/api/{n:int}/x", "/api/webhooks/", false],
      ["/api/ext/{id}", "/health", false],
      ["/api/{u:uuid}/x", "/api/0123abcd-", true],
      ["/api/{u:uuid}/x", "/api/0123abcg", false],
      ["/api/{f:float}/x", "/api/1.", true],
      ["/api/{f:float}/x", "/api/1.5/x", true],
      ["/api/{f:float}/x", "/api/1x", false],
    ])("%s can start with %s: %s", (template, prefix, expected) => {
      expect(canStartWith(segmentsOf(template), prefix)).toBe(expected);
    });
  });

  describe("reserved exact paths (plus trailing slashes)", () => {
    it.each([
      ["/api/ok", "/api/ok", true],
      ["/api/{s}", "/api/ok", true],
      ["/api/{rest:path}", "/api/ok", true],
      ["/api/ok/{rest:path}", "/api/ok", true],
      ["/api/ok/{s}", "/api/ok", false],
      ["/api/{n:int}", "/api/ok", false],
      ["/api/okay", "/api/ok", false],
    ])("%s can produce %s: %s", (template, exact, expected) => {
      expect(canEnterExact(segmentsOf(template), exact)).toBe(expected);
    });
  });
});
