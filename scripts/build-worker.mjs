// The Cloudflare Workers bundle: deploy/cloudflare-worker.ts and what it imports, as ES modules
// for workerd with nodejs_compat (node:* built-ins stay imports the runtime provides): the entry
// deerflow-edge-worker.mjs, and beside it the chunks it imports when first needed (the virtual
// sandbox's just-bash, loaded when a sandbox first opens). Upload the folder's .mjs files as the
// Worker's modules (wrangler: main = the entry, no_bundle, find_additional_modules).
//   node scripts/build-worker.mjs [--outdir dist/worker] [--metafile meta.json]
// Prints the modules it wrote, the entry first, one a line, relative to the folder.
import { rm, writeFile } from "node:fs/promises";
import { builtinModules } from "node:module";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const WORKER_ENTRY = join(root, "deploy/cloudflare-worker.ts");
export const DEFAULT_WORKER_OUTDIR = join(root, "dist/worker");
export const WORKER_ENTRY_MODULE = "deerflow-edge-worker.mjs";

/*
 * What an edge deployment never runs stays out of the bundle, without changing what runs
 * (bench/worker-bundle.ts prints what each module weighs; test/portable/gateway/cloudflare-worker.test.ts
 * runs the built bundle on workerd):
 * - zod's error messages in 40-odd languages (z.locales): LangChain and LangGraph reach zod for
 *   their schemas but never switch its locale; English, zod's default, stays.
 * - langsmith's API client (lib/client.mjs, ~270 KB source, and the generated REST client it
 *   pulls in): @langchain/core reaches langsmith for RunTree (a plain record every
 *   runWithConfig builds with tracingEnabled: false) and, only when LANGSMITH_TRACING is on, for
 *   LangChainTracer, which sends runs through Client.createRun/updateRun. RunTree's constructor
 *   builds a shared Client, so `Client` must still construct; LANGSMITH_CLIENT_STUB below does, keeps
 *   its config, and answers every call that would send a trace with an error naming the reason.
 *   Tracing to LangSmith is therefore NOT possible from the Workers build (use the Node, Deno or
 *   Bun server for that). The Workers entry never sets LANGSMITH_*; every stub call that would send
 *   a trace also prints its reason to the console, and the workerd test asserts that none of its
 *   runs printed one (no run reached a stub). The package's root index (langsmith/index.mjs) also re-exports the generated
 *   REST client (Langsmith, uploads, pagination), which @langchain/core never imports; it becomes
 *   the hand-written surface alone (lib/index.mjs: Client, RunTree, ...).
 * - ajv (with ajv-formats and fast-uri, ~135 KB): the MCP SDK's Client validates tool output
 *   schemas with AjvJsonSchemaValidator unless given another. The SDK ships its own edge
 *   validator, CfWorkerJsonSchemaValidator (@cfworker/json-schema, already in the bundle for
 *   @langchain/core), made for Workers, where ajv's code generation (new Function) is refused
 *   anyway. The Workers build resolves ajv-provider.js to it (same interface: getValidator).
 * - domino (@mixmark-io/domino, ~235 KB): a DOM implementation that turndown falls back to when
 *   the runtime has no DOMParser (Workers has none). Only just-bash's `html-to-markdown` command
 *   uses turndown; no middleware, tool or sandbox path of the chain calls it. DOMINO_STUB makes
 *   that one command fail with a clear message (exit 1, stderr) instead of converting.
 */
export const TRIM_MARKER = "deerflow-edge-trim";
const LANGSMITH_CLIENT_STUB = `
const reason = (what) => {
  const error = new Error("${TRIM_MARKER}: LangSmith tracing (" + what + ") is not part of the Cloudflare Workers build; trace from the Node, Deno or Bun server instead");
  console.error(error.message);
  return error;
};
export class Client {
  constructor(config = {}) { this.config = config; this.tracingMode = "off"; }
  static getDefaultClientConfig() { return {}; }
  createRun() { return Promise.reject(reason("createRun")); }
  updateRun() { return Promise.reject(reason("updateRun")); }
  batchIngestRuns() { return Promise.reject(reason("batchIngestRuns")); }
  multipartIngestRuns() { return Promise.reject(reason("multipartIngestRuns")); }
  awaitPendingTraceBatches() { return Promise.resolve(); }
  flush() { return Promise.resolve(); }
}
export const DEFAULT_UNCOMPRESSED_BATCH_SIZE_LIMIT_BYTES = 24 * 1024 * 1024;
export const DEFAULT_MAX_SIZE_BYTES = 1024 * 1024 * 1024;
export function mergeRuntimeEnvIntoRun(run) { return run; }
`;
const DOMINO_STUB = `
module.exports = {
  createDocument() {
    const error = new Error("${TRIM_MARKER}: html-to-markdown is not part of the Cloudflare Workers build (its HTML parser, domino, is left out)");
    console.error(error.message);
    throw error;
  },
};
`;
const edgeTrim = {
  name: TRIM_MARKER,
  setup(build) {
    build.onLoad({ filter: /[\\/]zod[\\/]v4[\\/]locales[\\/]index\.js$/ }, (args) => ({
      contents: 'export { default as en } from "./en.js";\n',
      resolveDir: dirname(args.path),
      loader: "js",
    }));
    build.onLoad({ filter: /[\\/]langsmith[\\/]lib[\\/]client\.mjs$/ }, () => ({ contents: LANGSMITH_CLIENT_STUB, loader: "js" }));
    build.onLoad({ filter: /[\\/]langsmith[\\/]index\.mjs$/ }, (args) => ({
      contents: 'export * from "./lib/index.mjs";\n',
      resolveDir: dirname(args.path),
      loader: "js",
    }));
    build.onLoad({ filter: /[\\/]@modelcontextprotocol[\\/]sdk[\\/]dist[\\/]esm[\\/]validation[\\/]ajv-provider\.js$/ }, (args) => ({
      contents: 'export { CfWorkerJsonSchemaValidator as AjvJsonSchemaValidator } from "./cfworker-provider.js";\n',
      resolveDir: dirname(args.path),
      loader: "js",
    }));
    build.onResolve({ filter: /^@mixmark-io\/domino$/ }, () => ({ path: "domino-stub", namespace: TRIM_MARKER }));
    build.onLoad({ filter: /^domino-stub$/, namespace: TRIM_MARKER }, () => ({ contents: DOMINO_STUB, loader: "js" }));
  },
};

/**
 * Bundles the Worker into `outdir`; resolves to its modules (relative to `outdir`, the entry
 * first) and esbuild's metafile (what each input adds to each module).
 */
export async function buildWorker(outdir = DEFAULT_WORKER_OUTDIR) {
  const result = await build({
    entryPoints: [WORKER_ENTRY],
    outdir: resolve(outdir),
    entryNames: WORKER_ENTRY_MODULE.replace(/\.mjs$/, ""),
    chunkNames: "[name]-[hash]",
    outExtension: { ".js": ".mjs" },
    splitting: true,
    bundle: true,
    format: "esm",
    platform: "neutral",
    target: "es2023",
    // What wrangler asks for: the Workers build of a package, else its browser build.
    conditions: ["workerd", "worker", "browser", "import", "default"],
    mainFields: ["browser", "module", "main"],
    external: ["node:*", ...builtinModules],
    minify: true,
    metafile: true,
    legalComments: "none",
    plugins: [edgeTrim],
    logLevel: "warning",
  });
  const modules = Object.keys(result.metafile.outputs).map((path) => relative(resolve(outdir), resolve(path)));
  modules.sort((a, b) => Number(b === WORKER_ENTRY_MODULE) - Number(a === WORKER_ENTRY_MODULE) || a.localeCompare(b));
  return { modules, metafile: result.metafile };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const option = (name) => {
    const at = args.indexOf(name);
    return at === -1 ? undefined : args[at + 1];
  };
  const outdir = option("--outdir") ?? DEFAULT_WORKER_OUTDIR;
  await rm(outdir, { recursive: true, force: true });
  const { modules, metafile } = await buildWorker(outdir);
  const meta = option("--metafile");
  if (meta) await writeFile(meta, JSON.stringify(metafile));
  for (const module of modules) console.log(module);
}
