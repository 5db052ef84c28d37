import type { Context, MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { GATEWAY_DEFAULTS, type GatewayLimitsConfig } from "../config/gateway.ts";
import { DeerflowError, errorMessage } from "../core/errors.ts";
import { jsonDepthExcess } from "../core/json-depth.ts";
import { isPublicPath } from "./auth/request.ts";
import type { GatewayEnv } from "./types.ts";

/*
 * What one request may cost before a route sees it (`gateway.limits`): the path's length, depth and
 * segment length, checked in one pass over the URL before anything touches storage or a sandbox;
 * the body's size, per kind of route, counted while it arrives so an endless chunked body is cut
 * off at the cap; and the nesting of a JSON body, checked on its text before it is parsed.
 */

export type BodyKind = "unauthenticated" | "run" | "upload" | "default";

const CONFIG_KEY = "gateway.limits";

/** Run creation: thread runs (background, stream, wait) and stateless runs. */
const RUN_ROUTE = /^\/api\/(?:threads\/[^/]+\/)?runs(?:\/stream|\/wait)?\/?$/;
const UPLOAD_ROUTE = /^\/api\/threads\/[^/]+\/uploads\/?$/;
/** An artifact edit carries a whole file: held to the upload caps by its route, not to `max_body_bytes`. */
const ARTIFACT_EDIT_ROUTE = /^\/api\/threads\/[^/]+\/artifacts\/./;

/**
 * Which body cap a request gets, from the path Hono routes on. Uploads are parsed as they stream
 * by the upload route itself, against the caps in `gateway.uploads`, so no generic cap applies
 * (and nothing here buffers them); an artifact edit (PUT) is capped by its route by the same caps.
 */
export function bodyKindOf(method: string, path: string): BodyKind {
  if (isPublicPath(path)) return "unauthenticated";
  if (method === "POST" && UPLOAD_ROUTE.test(path)) return "upload";
  if (method === "PUT" && ARTIFACT_EDIT_ROUTE.test(path)) return "upload";
  if (method === "POST" && RUN_ROUTE.test(path)) return "run";
  return "default";
}

const BODY_LIMIT_KEYS = {
  unauthenticated: "max_unauthenticated_body_bytes",
  run: "max_run_body_bytes",
  default: "max_body_bytes",
} as const satisfies Record<Exclude<BodyKind, "upload">, keyof GatewayLimitsConfig>;

function sizeText(bytes: number): string {
  if (bytes % (1024 * 1024) === 0) return `${bytes / (1024 * 1024)} MiB`;
  if (bytes % 1024 === 0) return `${bytes / 1024} KiB`;
  return `${bytes} bytes`;
}

/** The limits the path middleware put on the context, or the defaults for an app without it. */
export function requestLimitsOf(c: Context): GatewayLimitsConfig {
  return (c.get("limits") as GatewayLimitsConfig | undefined) ?? GATEWAY_DEFAULTS.limits;
}

/** The path as sent, without the query: what the request line carried, still percent-encoded. */
function rawPathOf(url: string): string {
  const start = url.indexOf("/", url.indexOf("://") + 3);
  if (start < 0) return "/";
  const query = url.indexOf("?", start);
  return query < 0 ? url.slice(start) : url.slice(start, query);
}

interface PathShape {
  readonly segments: number;
  readonly longestSegment: number;
}

/** One pass: "/" and "%2F" both separate segments, as a route's decoded parameter will see them. */
function pathShape(path: string): PathShape {
  let segments = 0;
  let longestSegment = 0;
  let current = 0;
  for (let i = 0; i < path.length; i++) {
    const ch = path.charCodeAt(i);
    const encodedSlash = ch === 0x25 && path.charCodeAt(i + 1) === 0x32 && (path.charCodeAt(i + 2) | 0x20) === 0x66;
    if (ch === 0x2f || encodedSlash) {
      segments++;
      current = 0;
      if (encodedSlash) i += 2;
    } else if (++current > longestSegment) longestSegment = current;
  }
  return { segments, longestSegment };
}

/** Why a path is refused (414), or undefined when it is within the limits. */
export function pathLimitViolation(url: string, limits: GatewayLimitsConfig): string | undefined {
  const path = rawPathOf(url);
  if (path.length > limits.max_path_bytes) {
    return (
      `Request path too long: ${path.length} bytes; the limit is ${limits.max_path_bytes} bytes ` +
      `(${CONFIG_KEY}.max_path_bytes). Ask for a shorter path.`
    );
  }
  const { segments, longestSegment } = pathShape(path);
  if (segments > limits.max_path_segments) {
    return (
      `Request path too deep: ${segments} segments; the limit is ${limits.max_path_segments} ` +
      `(${CONFIG_KEY}.max_path_segments). Ask for a path with fewer folders.`
    );
  }
  if (longestSegment > limits.max_path_segment_bytes) {
    return (
      `Request path has a segment of ${longestSegment} bytes; the limit is ${limits.max_path_segment_bytes} bytes per segment ` +
      `(${CONFIG_KEY}.max_path_segment_bytes). Use a shorter id or name.`
    );
  }
  return undefined;
}

export interface RequestLimitMiddleware {
  /** Path length, depth and segment length (414), before anything else looks at the request. */
  readonly paths: MiddlewareHandler<GatewayEnv>;
  /** Body size per kind of route (413); after authentication, so a refused caller's body is never read. */
  readonly bodies: MiddlewareHandler<GatewayEnv>;
}

/** The gateway's request limits as two middlewares; install `paths` early and `bodies` after auth. */
export function createRequestLimits(limits: GatewayLimitsConfig = GATEWAY_DEFAULTS.limits): RequestLimitMiddleware {
  const paths: MiddlewareHandler<GatewayEnv> = async (c, next) => {
    c.set("limits", limits);
    const violation = pathLimitViolation(c.req.url, limits);
    if (violation !== undefined) return c.json({ detail: violation }, 414);
    return next();
  };

  const byKind = Object.fromEntries(
    Object.entries(BODY_LIMIT_KEYS).map(([kind, key]) => {
      const maxSize = limits[key];
      const limited = bodyLimit({
        maxSize,
        onError: (c) =>
          c.json(
            {
              detail:
                `Request body too large: more than ${maxSize} bytes (${sizeText(maxSize)}) for ${c.req.method} ${c.req.path}; ` +
                `the limit is ${CONFIG_KEY}.${key}. Send a smaller body.`,
            },
            413,
          ),
      });
      return [kind, limited];
    }),
  ) as Record<Exclude<BodyKind, "upload">, MiddlewareHandler>;

  const bodies: MiddlewareHandler<GatewayEnv> = async (c, next) => {
    const kind = bodyKindOf(c.req.method, c.req.path);
    if (kind === "upload") return next();
    let reached = false;
    try {
      return await byKind[kind](c, () => {
        reached = true;
        return next();
      });
    } catch (error) {
      // A failure after the body was read belongs to the route; before, the body itself broke off.
      if (reached) throw error;
      return c.json({ detail: `The request body could not be read (${errorMessage(error)}); send it again whole.` }, 400);
    }
  };

  return { paths, bodies };
}

/** A request body that is not acceptable JSON: not JSON at all, or nested past the limit. */
export class JsonBodyError extends DeerflowError {
  declare readonly code: "invalid_json" | "json_too_deep";
  readonly status = 422;
  constructor(code: "invalid_json" | "json_too_deep", message: string) {
    super(code, message);
    this.name = "JsonBodyError";
  }
}

/**
 * The JSON body, or `undefined` for an empty one. Its nesting is checked on the text first (a 422
 * naming the limit and where), so nothing recursive ever sees a body deeper than the limit.
 * `example` completes "send a JSON object such as ..." when the text is not JSON.
 */
export async function readJsonBody(c: Context, example?: string): Promise<unknown> {
  const text = await c.req.text();
  if (text.trim() === "") return undefined;
  const maxDepth = requestLimitsOf(c).max_json_depth;
  const excess = jsonDepthExcess(text, maxDepth);
  if (excess !== undefined) {
    throw new JsonBodyError(
      "json_too_deep",
      `Request body nests deeper than ${maxDepth} levels at ${excess.path}; the limit is ${CONFIG_KEY}.max_json_depth. Send flatter data.`,
    );
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new JsonBodyError(
      "invalid_json",
      `Request body is not valid JSON (${errorMessage(error)}); send a JSON object${example ? ` such as ${example}` : ""}.`,
    );
  }
}
