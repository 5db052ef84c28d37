import type { Hono } from "hono";
import * as v from "valibot";
import { ConfigError } from "../../config/index.ts";
import { DeerflowError } from "../../core/errors.ts";
import type { LiveMcpConfig } from "../../mcp/live-config.ts";
import type { Env } from "../../ports/runtime-ports.ts";
import { stdioServerRefusal } from "../mcp-command-policy.ts";
import { httpError, JsonObjectSchema, jsonObject, parseJsonObjectBody } from "../errors.ts";
import type { GatewayEnv, RouteGuard } from "../types.ts";

/*
 * /api/mcp/config: the `mcpServers` section of extensions_config.json, as DeerFlow's UI (Settings →
 * Tools) reads and toggles it. Every signed-in user reads it; only an administrator changes it.
 * PUT replaces the whole section, PATCH turns one server on or off (upstream's split). Secrets are
 * never sent back: env and header values read "***" (a `$NAME` placeholder, which names a variable
 * and holds no secret, is shown as written), and "***" sent back for a key the server already has
 * keeps the stored value, so the UI's read-modify-write round trip cannot destroy a secret. The
 * file is validated with the loader's own schema before it is written (atomically), and the next
 * run's MCP tools come from the new file. A stdio server the API adds or whose launch it changes
 * must pass the command policy (mcp-command-policy.ts).
 */

export interface McpRouteDeps {
  readonly guard: RouteGuard;
  readonly mcp: LiveMcpConfig;
  /** Reads DEER_FLOW_MCP_STDIO_COMMAND_ALLOWLIST (what a stdio server written here may launch). */
  readonly env: Env;
}

/** What a masked secret reads as; upstream's spelling, so its UI shows the same. */
export const MASKED_SECRET = "***";
/** The sections of one server whose values are secrets. */
const SECRET_MAPS = ["env", "headers"] as const;
/** Sections kept from the stored server when a PUT leaves them out (the UI's form does not show them). */
const KEPT_WHEN_ABSENT = ["routing", "tools"] as const;
const PLACEHOLDER = /^\$[A-Za-z_][A-Za-z0-9_]*$/;

type Json = Record<string, unknown>;

const PutSchema = v.object({ mcp_servers: jsonObject(v.record(v.string(), JsonObjectSchema)) });
const PatchSchema = v.strictObject({ server_name: v.pipe(v.string(), v.nonEmpty("expected a server name")), enabled: v.boolean() });

const isJson = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value);

function serversOf(file: Json): Json {
  const servers = file["mcpServers"];
  return isJson(servers) ? servers : {};
}

function maskServer(server: Json): Json {
  const out: Json = { ...server, enabled: server["enabled"] ?? true, description: server["description"] ?? "" };
  for (const key of SECRET_MAPS) {
    const values = server[key];
    if (!isJson(values)) continue;
    out[key] = Object.fromEntries(
      Object.entries(values).map(([name, value]) => [name, typeof value === "string" && PLACEHOLDER.test(value) ? value : MASKED_SECRET]),
    );
  }
  return out;
}

/** The UI's MCPConfig: every server of the file, secrets masked. */
export function mcpConfigJson(file: Json): { mcp_servers: Json } {
  return { mcp_servers: Object.fromEntries(Object.entries(serversOf(file)).map(([name, server]) => [name, isJson(server) ? maskServer(server) : server])) };
}

/** An incoming server with the stored secrets put back where it sent the mask. */
function mergeServer(name: string, incoming: Json, stored: Json | undefined): Json {
  const merged: Json = { ...incoming };
  for (const key of SECRET_MAPS) {
    const values = incoming[key];
    if (!isJson(values)) continue;
    const storedValues = isJson(stored?.[key]) ? (stored[key] as Json) : {};
    merged[key] = Object.fromEntries(
      Object.entries(values).map(([entry, value]) => {
        if (value !== MASKED_SECRET) return [entry, value];
        if (!Object.hasOwn(storedValues, entry)) {
          throw httpError(422, `Invalid request body: mcp_servers.${name}.${key}.${entry}: "${MASKED_SECRET}" stands for a stored secret, and this server has none under that name; send the real value.`);
        }
        return [entry, storedValues[entry]];
      }),
    );
  }
  for (const key of KEPT_WHEN_ABSENT) {
    if (!Object.hasOwn(incoming, key) && stored && Object.hasOwn(stored, key)) merged[key] = stored[key];
  }
  return merged;
}

/** What a server launches; an entry whose launch is unchanged (written by hand, say) is not re-judged. */
const launchOf = (server: Json | undefined): string => JSON.stringify([server?.["type"] ?? server?.["transport"] ?? "stdio", server?.["command"], server?.["args"], server?.["env"]]);

function checkLaunch(name: string, merged: Json, stored: Json | undefined, env: Env): void {
  if (stored && launchOf(stored) === launchOf(merged)) return;
  const refusal = stdioServerRefusal(merged, env);
  if (refusal) throw httpError(422, `Invalid request body: mcp_servers.${name}.${refusal[0]}: ${refusal[1]}.`);
}

/** The update's refusals as the UI reads them: `detail` names the key, the file is left as it was. */
async function applying(mcp: LiveMcpConfig, change: (file: Json) => Json): Promise<Json> {
  try {
    return await mcp.update(change);
  } catch (error) {
    if (error instanceof ConfigError) {
      const issues = error.issues.slice(0, 10).map((issue) => (issue.path === "" ? issue.message : `${issue.path}: ${issue.message}`));
      throw httpError(422, `Invalid MCP configuration (${mcp.fileName} left unchanged): ${issues.join("; ")}`);
    }
    if (error instanceof DeerflowError && (error.code === "extensions_config_read_only" || error.code === "extensions_config_invalid")) {
      throw httpError(409, error.message);
    }
    throw error;
  }
}

async function readFile(mcp: LiveMcpConfig): Promise<Json> {
  try {
    return await mcp.read();
  } catch (error) {
    if (error instanceof DeerflowError && error.code === "extensions_config_invalid") throw httpError(409, error.message);
    throw error;
  }
}

export function registerMcpRoutes(api: Hono<GatewayEnv>, deps: McpRouteDeps): void {
  const { guard, mcp, env } = deps;
  const what = "the MCP configuration";

  api.get("/mcp/config", async (c) => c.json(mcpConfigJson(await readFile(mcp))));

  api.put("/mcp/config", async (c) => {
    guard.administrator(c, what);
    const body = await parseJsonObjectBody(c, PutSchema);
    const written = await applying(mcp, (file) => {
      const stored = serversOf(file);
      const servers = Object.fromEntries(
        Object.entries(body.mcp_servers).map(([name, server]) => {
          const before = isJson(stored[name]) ? stored[name] : undefined;
          const merged = mergeServer(name, server, before);
          checkLaunch(name, merged, before, env);
          return [name, merged];
        }),
      );
      // The file's other sections (skills, middlewares, ...) belong to other readers and stay as they are.
      return { ...file, mcpServers: servers };
    });
    return c.json(mcpConfigJson(written));
  });

  api.patch("/mcp/config", async (c) => {
    guard.administrator(c, what);
    const body = await parseJsonObjectBody(c, PatchSchema);
    const written = await applying(mcp, (file) => {
      const servers = serversOf(file);
      const server = servers[body.server_name];
      if (!isJson(server)) throw httpError(404, `MCP server '${body.server_name}' not found`);
      return { ...file, mcpServers: { ...servers, [body.server_name]: { ...server, enabled: body.enabled } } };
    });
    return c.json(mcpConfigJson(written));
  });
}
