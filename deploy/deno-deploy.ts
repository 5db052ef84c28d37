// deerflow-edge on Deno Deploy: deploy this file as is (`deno deploy`, or deployctl with
// --entrypoint deploy/deno-deploy.ts), or run it locally with the permissions Deploy grants:
//
//   DEERFLOW_API_KEY=... deno serve --allow-net --allow-env --allow-read --unstable-kv deploy/deno-deploy.ts
//
// Configured from environment variables only (src/cli/deploy-env.ts lists them; README, "Deploy to
// Deno Deploy"): threads, checkpoints and runs in Deno KV (Deno.openKv() with no path: the
// project's database on Deploy, Deno's default database locally; DEERFLOW_KV_PATH names a file
// instead), commands in the virtual sandbox (in memory, no host access). It writes no file, starts
// no process and needs no --allow-sys. Without auth, a model key or with a malformed variable it
// does not start: one line names the variable to set.

// AsyncLocalStorage first: LangGraph's interrupt() reads its config from it
// (docs/toolchain.md, AsyncLocalStorage in every entry).
import "../adapters/shared/als.ts";
// Before any run: langsmith's profile lookup must not need --allow-sys=homedir.
import "../adapters/deno/langsmith-profile.ts";
import "../adapters/deno/quiet-sandbox-notes.ts";
import { createDenoEnv } from "../adapters/deno/env.ts";
import { openDenoKvCoordination } from "../adapters/deno/kv-coordination.ts";
import { createDenoKvKeyValue } from "../adapters/deno/kv-key-value.ts";
import { createGatewayHost } from "../adapters/shared/gateway-host.ts";
import { reclaimV8Memory } from "../adapters/shared/v8-memory.ts";
import { createWebSandboxWorkers } from "../adapters/shared/web-sandbox-worker.ts";
import { deployConfigFromEnv } from "../src/cli/deploy-env.ts";
import { openGateway } from "../src/cli/serve.ts";
import { errorMessage } from "../src/core/errors.ts";
import type { FetchHandler } from "../src/ports/http-server.ts";

declare const Deno: {
  exit(code: number): never;
  addSignalListener(signal: "SIGINT" | "SIGTERM", handler: () => void): void;
};

const stderr = { write: (text: string) => console.error(text.replace(/\n$/, "")), isTTY: false };

async function start(): Promise<FetchHandler> {
  const env = createDenoEnv();
  const config = deployConfigFromEnv(env);
  const host = createGatewayHost({
    env,
    stderr,
    reclaimMemory: reclaimV8Memory,
    // Web Workers where the platform has them: a runaway command is stopped without stalling requests.
    ...(typeof (globalThis as { Worker?: unknown }).Worker === "function" ? { sandboxWorkers: createWebSandboxWorkers() } : {}),
    // Deploy runs many isolates over one database: runs are coordinated through it (leases,
    // atomic admission, frames any isolate reads). A local KV file coordinates no second process.
    keyValues: { denoKv: createDenoKvKeyValue, denoKvShared: ({ path }) => openDenoKvCoordination({ path }) },
  });
  // Not loopback: the gateway itself refuses to serve without auth, whatever the config says.
  const opened = await openGateway(host, { config, configDir: ".", hostname: "0.0.0.0" });
  stopOnSignal(opened.close);
  const model = config.models[0];
  console.log(
    `deerflow-edge on Deno Deploy · auth ${config.gateway?.auth.mode} · model ${model ? `${model.model} at ${model.base_url}` : "demo (built-in demo model)"} · storage Deno KV${config.storage.path ? ` ${config.storage.path}` : ""}`,
  );
  return opened.gateway.fetch;
}

/**
 * SIGTERM (a platform replacing the process) or Ctrl-C: runs in flight finish or are saved as
 * interrupted (5 s), services stop, storage closes, then the process ends.
 */
function stopOnSignal(close: () => Promise<void>): void {
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    console.error("stopping: draining runs, closing storage…");
    void close().finally(() => Deno.exit(0));
  };
  try {
    Deno.addSignalListener("SIGTERM", stop);
    Deno.addSignalListener("SIGINT", stop);
  } catch {
    // Where signals cannot be listened to, the platform stops the isolate itself.
  }
}

let handler: FetchHandler;
try {
  handler = await start();
} catch (error) {
  // One line naming what to set, and no server answering.
  console.error(`error: ${errorMessage(error).split("\n")[0]}`);
  Deno.exit(1);
}

export default {
  fetch(request: Request, info?: { remoteAddr?: { hostname?: string } }): Response | Promise<Response> {
    const remoteAddress = info?.remoteAddr?.hostname;
    return handler(request, remoteAddress === undefined ? {} : { remoteAddress });
  },
};
