/*
 * The conservative route matcher behind contributed-router admission. It answers two questions
 * about a route template: "does an earlier route provably serve every path this one would?" (a
 * shadow: the earlier route wins, so the later one would be dead code) and "can this route reach a
 * path the host reserves for unauthenticated or CSRF-exempt traffic?" (a security boundary).
 *
 * Shadowing fails open: a relationship that would need general regex inclusion is reported as "no
 * shadow". Reserved-path checks fail closed: the five standard converters' languages are known
 * exactly, and a nonstandard one the host registered is assumed to match anything.
 */

export type Converter = "str" | "int" | "float" | "uuid" | "path";

const HEX = "[0-9a-fA-F]";

/**
 * Each converter's language. `path` is non-empty here (Starlette's is `.*`) because Hono's
 * `:p{.+}` is what serves it; `uuid` is spelled without `{n}` quantifiers because Hono's path
 * parser ends a parameter's pattern at the first closing brace.
 */
export const CONVERTER_PATTERNS: Readonly<Record<Converter, string>> = Object.freeze({
  str: "[^/]+",
  int: "[0-9]+",
  float: "[0-9]+(?:\\.[0-9]+)?",
  uuid: [8, 4, 4, 4, 12].map((width) => HEX.repeat(width)).join("-?"),
  path: ".+",
});

const CONVERTERS = new Set<string>(Object.keys(CONVERTER_PATTERNS));

/**
 * Nonstandard converters the host serves (name → one-segment regex), projected when routers are
 * mounted. Their languages are not known to this matcher: a route using one proves a shadow only
 * against an identical matcher, and reserved-path checks treat it as matching anything (fail closed).
 */
export type ConverterRegistry = ReadonlyMap<string, string>;
export const NO_CONVERTERS: ConverterRegistry = new Map();
const CONVERTER_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** A frozen copy of the host's nonstandard converters, or the problem with one of them. */
export function projectConverters(converters: Readonly<Record<string, string>> | undefined): ConverterRegistry | string {
  const projected = new Map<string, string>();
  for (const [name, pattern] of Object.entries(converters ?? {})) {
    const label = `converter "${name}"`;
    if (!CONVERTER_NAME.test(name)) return `${label}: a converter name is letters, digits and "_", not starting with a digit`;
    if (CONVERTERS.has(name)) return `${label}: ${name} is a standard converter and cannot be redefined`;
    if (typeof pattern !== "string" || pattern === "") return `${label}: its pattern must be a non-empty regex string`;
    // Hono ends a parameter's pattern at the first "}" and numbers its own capture groups.
    if (pattern.includes("}")) return `${label}: its pattern may not contain "}" (spell counted repeats out)`;
    if (/\((?!\?)/.test(pattern.replace(/\\./g, ""))) return `${label}: its pattern may not contain a capturing group; use (?:...)`;
    try {
      new RegExp(pattern);
    } catch (error) {
      return `${label}: its pattern is not a valid regex (${error instanceof Error ? error.message : String(error)})`;
    }
    projected.set(name, pattern);
  }
  return projected;
}

function unknownConverter(path: string, converter: string, converters: ConverterRegistry): string {
  const known = [...CONVERTERS, ...converters.keys()];
  return `path ${path} uses the unknown parameter type "${converter}"; use ${known.slice(0, -1).join(", ")} or ${known.at(-1)}`;
}

/** One piece of a compound segment: `file-{id}.{ext}` is literal, param, literal, param. */
export type SegmentPart = { readonly kind: "literal"; readonly value: string } | { readonly kind: "param"; readonly converter: Exclude<Converter, "path"> };

export type Segment =
  | { readonly kind: "literal"; readonly value: string }
  | { readonly kind: "param"; readonly converter: Converter }
  /** Text and parameters sharing one segment (`v{n:int}`, `{name}.{ext}`); at least one parameter. */
  | { readonly kind: "compound"; readonly parts: readonly SegmentPart[] }
  /** A host segment this matcher cannot classify: its one-segment regex, or null when even that is unknown. */
  | { readonly kind: "opaque"; readonly pattern: string | null };

/** One path a route answers, with the methods it answers it for. */
export interface RouteClaim {
  /** The template as written, for messages. */
  readonly path: string;
  /** Null means every method. */
  readonly methods: ReadonlySet<string> | null;
  readonly segments: readonly Segment[];
  /** Equal keys mean equal matchers (parameter names normalised away). */
  readonly key: string;
}

/**
 * The methods a route serves. GET also answers HEAD: Hono serves HEAD through the GET route, so a
 * contributed HEAD route under a host GET route would never be reached.
 */
export function routeMethods(method: string): ReadonlySet<string> | null {
  const upper = method.toUpperCase();
  if (upper === "ALL") return null;
  return new Set(upper === "GET" ? ["GET", "HEAD"] : [upper]);
}

export function methodsOverlap(left: ReadonlySet<string> | null, right: ReadonlySet<string> | null): boolean {
  if (left === null || right === null) return true;
  for (const method of left) if (right.has(method)) return true;
  return false;
}

function literalKey(value: string): string {
  return value.replaceAll("%", "%25").replaceAll("{", "%7B");
}

function segmentKey(segment: Segment): string {
  switch (segment.kind) {
    case "literal":
      return literalKey(segment.value);
    case "param":
      return `{${segment.converter}}`;
    case "compound":
      return segment.parts.map((part) => (part.kind === "literal" ? literalKey(part.value) : `{${part.converter}}`)).join("");
    case "opaque":
      return `{re:${segment.pattern ?? "?"}}`;
  }
}

function claim(path: string, methods: ReadonlySet<string> | null, segments: readonly Segment[]): RouteClaim {
  return Object.freeze({ path, methods, segments: Object.freeze([...segments]), key: "/" + segments.map(segmentKey).join("/") });
}

// ---------------------------------------------------------------------------------------------
// Contributed templates: `/api/ext/{id}`, `/api/ext/{n:int}`, `/files/{rest:path}`.

const PARAM = /^\{([A-Za-z_][A-Za-z0-9_]*)(?::([A-Za-z_][A-Za-z0-9_]*))?\}$/;
const INNER_PARAM = /\{([A-Za-z_][A-Za-z0-9_]*)(?::([A-Za-z_][A-Za-z0-9_]*))?\}/g;
const LITERAL = /^[A-Za-z0-9._~!$&'()+,;=@-]+$/;

export interface TemplateParam {
  readonly name: string;
  /** A standard converter, or the name of one in the host's ConverterRegistry. */
  readonly converter: string;
}

export type ParsedTemplate =
  | { readonly ok: true; readonly segments: readonly Segment[]; readonly params: readonly (TemplateParam | null)[] }
  | { readonly ok: false; readonly problem: string };

/**
 * A contributed route template, or why the host cannot serve it. Every segment is a literal, one
 * `{name}` / `{name:converter}`, or a compound of text and parameters (`v{n:int}`, `{name}.{ext}`);
 * a `{rest:path}` catch-all must be a whole, last segment. Within that, both the shadow and the
 * reserved-path checks are exact, and the Hono path built from it means the same.
 */
export function parseTemplate(path: string, converters: ConverterRegistry = NO_CONVERTERS): ParsedTemplate {
  if (typeof path !== "string" || !path.startsWith("/")) return { ok: false, problem: `path ${JSON.stringify(path)} must start with "/"` };
  if (path === "/") return { ok: true, segments: [], params: [] };
  if (path.endsWith("/")) return { ok: false, problem: `path ${path} ends with "/"; drop the trailing slash` };
  const raw = path.slice(1).split("/");
  const segments: Segment[] = [];
  const params: (TemplateParam | null)[] = [];
  const names = new Set<string>();
  for (const [index, text] of raw.entries()) {
    if (text === "") return { ok: false, problem: `path ${path} has an empty segment ("//")` };
    const match = PARAM.exec(text);
    if (match !== null) {
      const name = match[1] as string;
      const converter = match[2] ?? "str";
      const custom = CONVERTERS.has(converter) ? undefined : converters.get(converter);
      if (!CONVERTERS.has(converter) && custom === undefined) return { ok: false, problem: unknownConverter(path, converter, converters) };
      if (names.has(name)) return { ok: false, problem: `path ${path} names the parameter "${name}" twice` };
      if (custom !== undefined) {
        names.add(name);
        segments.push({ kind: "opaque", pattern: custom });
        params.push({ name, converter });
        continue;
      }
      if (converter === "path" && index !== raw.length - 1) {
        return { ok: false, problem: `path ${path}: a {${name}:path} parameter must be the last segment` };
      }
      if (names.has(name)) return { ok: false, problem: `path ${path} names the parameter "${name}" twice` };
      names.add(name);
      segments.push({ kind: "param", converter: converter as Converter });
      params.push({ name, converter: converter as Converter });
      continue;
    }
    if (text.includes("{") || text.includes("}")) {
      const compound = parseCompound(path, text, index === raw.length - 1, names, converters);
      if (typeof compound === "string") return { ok: false, problem: compound };
      segments.push(compound);
      params.push(null);
      continue;
    }
    if (!LITERAL.test(text)) {
      return { ok: false, problem: `path ${path}: segment "${text}" has a character the router treats specially or decodes (: * ? # % or whitespace)` };
    }
    segments.push({ kind: "literal", value: text });
    params.push(null);
  }
  return { ok: true, segments, params };
}

/** A segment mixing text and parameters, or the problem with it. Records the names it uses in `names`. */
function parseCompound(path: string, text: string, last: boolean, names: Set<string>, converters: ConverterRegistry): Extract<Segment, { kind: "compound" }> | string {
  const parts: SegmentPart[] = [];
  const literal = (value: string): string | null => {
    if (value === "") return null;
    if (value.includes("{") || value.includes("}")) return `path ${path}: segment "${text}" has an unbalanced "{" or "}"`;
    if (!LITERAL.test(value)) return `path ${path}: segment "${text}" has a character the router treats specially or decodes (: * ? # % or whitespace)`;
    parts.push({ kind: "literal", value });
    return null;
  };
  let end = 0;
  for (const match of text.matchAll(INNER_PARAM)) {
    const problem = literal(text.slice(end, match.index));
    if (problem !== null) return problem;
    const name = match[1] as string;
    const converter = match[2] ?? "str";
    if (converters.has(converter)) return `path ${path}: the nonstandard converter in {${name}:${converter}} must be a whole segment`;
    if (!CONVERTERS.has(converter)) return unknownConverter(path, converter, converters);
    if (converter === "path") {
      return `path ${path}: a {${name}:path} parameter must be a whole segment${last ? "" : ", and the last one"}`;
    }
    if (names.has(name)) return `path ${path} names the parameter "${name}" twice`;
    names.add(name);
    parts.push({ kind: "param", converter: converter as Exclude<Converter, "path"> });
    end = match.index + match[0].length;
  }
  const problem = literal(text.slice(end));
  if (problem !== null) return problem;
  if (!parts.some((part) => part.kind === "param")) return `path ${path}: segment "${text}" has an unbalanced "{" or "}"`;
  return { kind: "compound", parts };
}

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** One segment's regex, as the Hono route and the coverage checks both use it. */
function compoundPattern(parts: readonly SegmentPart[]): string {
  return parts.map((part) => (part.kind === "literal" ? escapeRegex(part.value) : CONVERTER_PATTERNS[part.converter])).join("");
}

/** The claim of a contributed route whose template parsed. */
export function templateClaim(method: string, path: string, segments: readonly Segment[]): RouteClaim {
  return claim(path, routeMethods(method), segments);
}

/**
 * The Hono path serving a parsed template: `{id}` → `:id`, `{n:int}` → `:n{[0-9]+}`, a compound
 * `v{n:int}` → one parameter over the whole segment, `:seg-2{v[0-9]+}` (a name no template can
 * use; handlers read their parameters from the request URL, not from Hono).
 */
export function honoPathFor(parsed: Extract<ParsedTemplate, { ok: true }>): string {
  if (parsed.segments.length === 0) return "/";
  return parsed.segments
    .map((segment, index) => {
      if (segment.kind === "literal") return `/${segment.value}`;
      if (segment.kind === "compound") return `/:seg-${index}{${compoundPattern(segment.parts)}}`;
      const param = parsed.params[index] as TemplateParam;
      if (segment.kind === "opaque") return `/:${param.name}{${segment.pattern ?? ".+"}}`;
      return param.converter === "str" ? `/:${param.name}` : `/:${param.name}{${CONVERTER_PATTERNS[param.converter as Converter]}}`;
    })
    .join("");
}

// ---------------------------------------------------------------------------------------------
// Host routes, as Hono registered them: `/api/threads/:thread_id`, `/x/:n{[0-9]+}`, `/static/*`.

/** Hono's path split on "/", keeping a parameter's `{regex}` whole even when it contains "/". */
function splitHonoPath(path: string): string[] {
  const parts: string[] = [];
  let current = "";
  let depth = 0;
  for (const character of path.slice(1)) {
    if (character === "{") depth += 1;
    else if (character === "}") depth = Math.max(0, depth - 1);
    if (character === "/" && depth === 0) {
      parts.push(current);
      current = "";
    } else {
      current += character;
    }
  }
  parts.push(current);
  return parts;
}

const HONO_PARAM = /^:([^{?]+)(?:\{(.*)\})?(\?)?$/s;

function converterForRegex(regex: string, last: boolean): Converter | null {
  if (regex === "\\d+") return "int";
  if (last && regex === ".*") return "path";
  // A host route spelled with a converter's own pattern (what honoPathFor writes) has its language.
  for (const converter of Object.keys(CONVERTER_PATTERNS) as Converter[]) {
    if (regex === CONVERTER_PATTERNS[converter]) return converter !== "path" || last ? converter : null;
  }
  return null;
}

/**
 * Every claim one host route makes. A trailing `*` serves the prefix itself, the prefix with a
 * trailing slash and everything below it; an optional `:x?` serves the path with and without it.
 */
export function honoClaims(method: string, path: string): RouteClaim[] {
  const methods = routeMethods(method);
  if (!path.startsWith("/")) return [];
  if (path === "/") return [claim(path, methods, [])];
  const parts = splitHonoPath(path);
  const prefix: Segment[] = [];
  for (const [index, text] of parts.entries()) {
    const last = index === parts.length - 1;
    if (text === "*") {
      if (!last) {
        prefix.push({ kind: "opaque", pattern: null });
        continue;
      }
      return [
        claim(path, methods, prefix),
        claim(path, methods, [...prefix, { kind: "literal", value: "" }]),
        claim(path, methods, [...prefix, { kind: "param", converter: "path" }]),
      ];
    }
    const match = HONO_PARAM.exec(text);
    if (match !== null) {
      const regex = match[2];
      const optional = match[3] === "?";
      let segment: Segment;
      if (regex === undefined) segment = { kind: "param", converter: "str" };
      else {
        const converter = converterForRegex(regex, last);
        segment = converter === null ? { kind: "opaque", pattern: regex.includes("/") ? null : regex } : { kind: "param", converter };
      }
      if (optional && last) return [claim(path, methods, prefix), claim(path, methods, [...prefix, segment])];
      prefix.push(segment);
      continue;
    }
    if (text.includes("*") || text.includes(":")) {
      prefix.push({ kind: "opaque", pattern: null });
      continue;
    }
    prefix.push({ kind: "literal", value: text });
  }
  return [claim(path, methods, prefix)];
}

// ---------------------------------------------------------------------------------------------
// Coverage.

function fullMatch(pattern: string, value: string): boolean {
  try {
    return new RegExp(`^(?:${pattern})$`).test(value);
  } catch {
    return false;
  }
}

function converterCovers(owner: Converter, candidate: Converter): boolean {
  if (owner === candidate) return true;
  if (owner === "str" || owner === "path") return candidate === "int" || candidate === "float" || candidate === "uuid";
  if (owner === "float") return candidate === "int";
  return false;
}

/**
 * Compound segments are compared by shape: the same sequence of text and parameters, equal text
 * and each owner parameter's converter covering the candidate's at the same place, so every value
 * of the candidate splits into pieces the owner accepts. A different shape would need general
 * regex inclusion and is not claimed.
 */
function sameShapeCovers(owner: readonly SegmentPart[], candidate: readonly SegmentPart[]): boolean {
  return (
    owner.length === candidate.length &&
    owner.every((part, index) => {
      const other = candidate[index] as SegmentPart;
      if (part.kind === "literal") return other.kind === "literal" && other.value === part.value;
      return other.kind === "param" && converterCovers(part.converter, other.converter);
    })
  );
}

function segmentCovers(owner: Segment, candidate: Segment): boolean {
  if (owner.kind === "literal") return candidate.kind === "literal" && candidate.value === owner.value;
  if (candidate.kind === "opaque") return false;
  if (owner.kind === "opaque") return owner.pattern !== null && candidate.kind === "literal" && fullMatch(owner.pattern, candidate.value);
  if (owner.kind === "compound") {
    if (candidate.kind === "literal") return fullMatch(compoundPattern(owner.parts), candidate.value);
    return candidate.kind === "compound" && sameShapeCovers(owner.parts, candidate.parts);
  }
  if (candidate.kind === "literal") return fullMatch(CONVERTER_PATTERNS[owner.converter], candidate.value);
  // Every compound's values are non-empty and slash-free: a plain parameter holds them all.
  if (candidate.kind === "compound") return owner.converter === "str";
  return converterCovers(owner.converter, candidate.converter);
}

/** A trailing catch-all's `.` stops at a newline, so only segments that can never hold one are provably below it. */
function excludesNewline(segment: Segment): boolean {
  if (segment.kind === "literal") return !segment.value.includes("\n");
  if (segment.kind === "param") return segment.converter !== "str";
  if (segment.kind === "compound") return segment.parts.every((part) => (part.kind === "literal" ? !part.value.includes("\n") : part.converter !== "str"));
  return false;
}

/** Whether every path the candidate serves is served by the owner (ignoring methods). */
export function pathCovers(owner: RouteClaim, candidate: RouteClaim): boolean {
  if (owner.key === candidate.key) return true;
  const ownerSegments = owner.segments;
  const candidateSegments = candidate.segments;
  const tail = ownerSegments.at(-1);
  if (tail !== undefined && tail.kind === "param" && tail.converter === "path") {
    const prefix = ownerSegments.slice(0, -1);
    return (
      candidateSegments.length > prefix.length &&
      prefix.every((segment, index) => segmentCovers(segment, candidateSegments[index] as Segment)) &&
      candidateSegments.slice(prefix.length).every(excludesNewline)
    );
  }
  return (
    ownerSegments.length === candidateSegments.length &&
    ownerSegments.every((segment, index) => segmentCovers(segment, candidateSegments[index] as Segment))
  );
}

/** Whether `owner`, registered earlier, answers every request `candidate` would. */
export function shadows(owner: RouteClaim, candidate: RouteClaim): boolean {
  return methodsOverlap(owner.methods, candidate.methods) && pathCovers(owner, candidate);
}

export interface ClaimOwner {
  readonly claim: RouteClaim;
  /** `host`, or the `use` string of the extension that contributed it. */
  readonly holder: string;
}

/**
 * The first of a router's routes that an earlier route serves, in order; each candidate is also an
 * owner for the candidates after it, so a router cannot shadow itself.
 */
export function findShadow(candidates: readonly RouteClaim[], owners: readonly ClaimOwner[], holder: string): { path: string; holder: string } | null {
  const tentative = [...owners];
  for (const candidate of candidates) {
    for (const owner of tentative) {
      if (shadows(owner.claim, candidate)) return { path: candidate.path, holder: owner.holder };
    }
    tentative.push({ claim: candidate, holder });
  }
  return null;
}

// ---------------------------------------------------------------------------------------------
// Reserved paths (fail closed).

/** `any` is a nonstandard converter: its language is unknown, so the checks let it produce anything. */
type Token = { readonly kind: "literal"; readonly value: string } | { readonly kind: "param"; readonly converter: Converter } | { readonly kind: "any" };

function tokens(segments: readonly Segment[]): Token[] {
  const out: Token[] = [];
  const pushLiteral = (value: string) => {
    const previous = out.at(-1);
    if (previous !== undefined && previous.kind === "literal") out[out.length - 1] = { kind: "literal", value: previous.value + value };
    else out.push({ kind: "literal", value });
  };
  if (segments.length === 0) pushLiteral("/");
  for (const segment of segments) {
    pushLiteral("/");
    if (segment.kind === "literal") pushLiteral(segment.value);
    else if (segment.kind === "param") out.push({ kind: "param", converter: segment.converter });
    else if (segment.kind === "compound") {
      for (const part of segment.parts) {
        if (part.kind === "literal") pushLiteral(part.value);
        else out.push({ kind: "param", converter: part.converter });
      }
    } else out.push({ kind: "any" });
  }
  return out;
}

/** Whether some value of the converter starts with `prefix` (the prefix ends inside the value). */
function converterCanStartWith(converter: Converter, prefix: string): boolean {
  switch (converter) {
    case "path":
      return true;
    case "str":
      return !prefix.includes("/");
    case "int":
      return /^[0-9]*$/.test(prefix);
    case "float":
      return /^(?:[0-9]+(?:\.[0-9]*)?)?$/.test(prefix);
    case "uuid": {
      const hex = (c: string) => /^[0-9a-fA-F]$/.test(c);
      // The four optional dashes give sixteen shapes; a prefix fits one if it could begin it.
      for (let mask = 0; mask < 16; mask += 1) {
        let shape = "";
        [8, 4, 4, 4, 12].forEach((width, index) => {
          shape += "h".repeat(width);
          if (index < 4 && mask & (1 << index)) shape += "-";
        });
        if (prefix.length <= shape.length && [...prefix].every((c, i) => (shape[i] === "h" ? hex(c) : c === "-"))) return true;
      }
      return false;
    }
  }
}

/** Whether the template can produce a path that starts with `prefix`. */
export function canStartWith(segments: readonly Segment[], prefix: string): boolean {
  const list = tokens(segments);
  const memo = new Map<string, boolean>();
  const step = (tokenIndex: number, prefixIndex: number): boolean => {
    if (prefixIndex === prefix.length) return true;
    if (tokenIndex === list.length) return false;
    const key = `${tokenIndex}:${prefixIndex}`;
    const known = memo.get(key);
    if (known !== undefined) return known;
    const token = list[tokenIndex] as Token;
    const remaining = prefix.slice(prefixIndex);
    let result = false;
    if (token.kind === "any") {
      result = true;
    } else if (token.kind === "literal") {
      if (token.value.startsWith(remaining)) result = true;
      else if (remaining.startsWith(token.value)) result = step(tokenIndex + 1, prefixIndex + token.value.length);
    } else {
      const pattern = CONVERTER_PATTERNS[token.converter];
      for (let end = prefixIndex + 1; end <= prefix.length && !result; end += 1) {
        if (fullMatch(pattern, prefix.slice(prefixIndex, end)) && step(tokenIndex + 1, end)) result = true;
      }
      if (!result) result = converterCanStartWith(token.converter, remaining);
    }
    memo.set(key, result);
    return result;
  };
  return step(0, 0);
}

/** The template's full-path regex. */
function templateRegex(segments: readonly Segment[]): RegExp {
  const body = tokens(segments)
    .map((token) => (token.kind === "literal" ? escapeRegex(token.value) : token.kind === "any" ? "[\\s\\S]*" : `(?:${CONVERTER_PATTERNS[token.converter]})`))
    .join("");
  return new RegExp(`^${body}$`);
}

/**
 * Whether the template can produce `exact` followed by any number of slashes: security predicates
 * that strip trailing slashes treat all of those as the exact path. A shortest slash-only witness
 * is bounded by the template's length, because only `path` can match a slash.
 */
export function canEnterExact(segments: readonly Segment[], exact: string): boolean {
  const regex = templateRegex(segments);
  const bound = segments.length + 2;
  for (let slashes = 0; slashes <= bound; slashes += 1) {
    if (regex.test(exact + "/".repeat(slashes))) return true;
  }
  return false;
}
