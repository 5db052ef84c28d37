// The Cloudflare Workers bundle: deploy/cloudflare-worker.ts and what it imports, as ES modules
// for workerd with nodejs_compat (node:* built-ins stay imports the runtime provides): the entry
// deerflow-edge-worker.mjs, and beside it the chunks it imports when first needed (the virtual
// sandbox's just-bash, loaded when a sandbox first opens). Upload the folder's .mjs files as the
// Worker's modules (wrangler: main = the entry, no_bundle, find_additional_modules).
//   node scripts/build-worker.mjs [--outdir dist/worker] [--metafile meta.json] [--entry other.ts]
// Prints the modules it wrote, the entry first, one a line, relative to the folder.
import { readFile, rm, writeFile } from "node:fs/promises";
import { builtinModules } from "node:module";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { minify } from "rolldown/utils";

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
 *   the hand-written surface alone (lib/index.mjs: Client, RunTree, ...), and that without its prompt
 *   cache (Cache, PromptCache, promptCacheSingleton: a cache of Client.pullPrompt, which the stub
 *   cannot do; built at load, with a refresh timer and an fs dump). Nothing of the bundle imports
 *   those names, which esbuild would refuse ("No matching export") at build time.
 * - ajv (with ajv-formats and fast-uri, ~135 KB): the MCP SDK's Client validates tool output
 *   schemas with AjvJsonSchemaValidator unless given another. The SDK ships its own edge
 *   validator, CfWorkerJsonSchemaValidator (@cfworker/json-schema, already in the bundle for
 *   @langchain/core), made for Workers, where ajv's code generation (new Function) is refused
 *   anyway. The Workers build resolves ajv-provider.js to it (same interface: getValidator).
 * - just-bash's `file`, `html-to-markdown` and `curl` commands (TRIMMED_COMMANDS, ~29 KB gzip of
 *   the sandbox's chunk; trimmedJustBash says how): `file` carries a file-type database (magic
 *   numbers, a ZIP reader) for a question an edge agent answers with `head`/`od`; `html-to-markdown`
 *   needs turndown and a DOM (domino, ~235 KB) that Workers lacks; `curl` is registered only when
 *   just-bash gets network access, which deerflow-edge never gives it (it is "command not found"
 *   on every runtime). Each answers exit 127 with "<name>: deerflow-edge-trim: ..." on stderr (and
 *   prints it); the commands agents use (grep, rg, sed, awk, jq, find, ...) are all kept.
 *   turndown is stubbed likewise (TURNDOWN_STUB), so neither it nor domino is in the bundle.
 * - @langchain/core's load/import_map.js (nearly every @langchain/core module: prompts, output
 *   parsers, retrievers, vectorstores, tracers, testing, ...): load(), which the checkpoint
 *   serializer (JsonPlusSerializer) calls to revive lc-serialized objects, looks classes up there.
 *   This project's checkpoints hold messages (every class is langchain_core/messages) and
 *   LangGraph's own values; the map keeps REVIVABLE_NAMESPACES (messages, messages/tool, documents,
 *   outputs, prompt_values). Reviving a class of any other namespace throws (and prints)
 *   "deerflow-edge-trim: reviving a serialized langchain_core/<namespace> object ... is not part of
 *   the Cloudflare Workers build"; a namespace the full map does not know keeps load()'s "Invalid namespace".
 *   Fewer classes a crafted checkpoint can instantiate, too.
 * - zod's z.compile (core/compile.js: schemas compiled to code run by new Function, which workerd
 *   refuses, so compile() there already returns the schema unchanged; the stub does the same, and
 *   withParser/compileFn throw the trim's reason) and z.fromJSONSchema (LangChain converts zod to
 *   JSON Schema, never back): nothing of the chain calls either.
 * - @langchain/core's sax-js, the XML parser of XMLOutputParser, which output_parsers/index.js
 *   imports for its side effects: no model output is parsed as XML; parser() throws the reason.
 * - the MCP SDK's OAuth client (client/auth.js, its OAuth metadata schemas, pkce-challenge): used
 *   only with an authProvider, which src/mcp/client.ts never passes (config refuses `oauth`;
 *   tokens go in `headers`); auth() throws the reason, the 401 helpers stay as the SDK wrote them.
 * - @langchain/core's tiktoken (js-tiktoken; its ranks come from tiktoken.pages.dev): only
 *   getNumTokens/calculateMaxTokens use it, both falling back to characters / 4 when it fails (they
 *   warn why); the chain calls neither. And runnables/graph_mermaid.js (Graph.drawMermaid, and
 *   drawMermaidPng through mermaid.ink): the gateway's graph route answers JSON; both throw the reason.
 * - @langchain/core's content-block translators of providers other than OpenAI (anthropic, bedrock,
 *   google, groq, ...; messages/block_translators): AIMessage.contentBlocks (and .text, read from
 *   it) picks one by response_metadata.model_provider, which this project's model client never
 *   sets; a message that names a left-out provider (one a client sent) is read by the generic path
 *   its provider-less messages take, and the first such read per provider prints the trim's
 *   reason. OpenAI's translator stays (the wire protocol the model client speaks).
 * - @langchain/core's js-sha256, which keys a model's response cache (caches/index.js): no model of
 *   the chain is given `cache`; a model that is fails its call naming the trim.
 * Every stub's error starts with TRIM_MARKER and is printed to the console, through LEFT_OUT
 * (tiktoken's through getNumTokens' own warning; zod's compile helpers, which no run calls, only throw);
 * test/portable/gateway/worker-trims.test.ts serves a probe built with these trims on workerd
 * (a checkpoint of every message type round-trips, a left-out namespace and each trimmed command
 * answer the trim's reason, the commands agents use still run), and the workerd test asserts
 * that none of its runs printed a deerflow-edge-trim line.
 */
export const TRIM_MARKER = "deerflow-edge-trim";
// Every stub below reports through this one module (LEFT_OUT, a module of the build's own): the error it throws or
// rejects with starts with TRIM_MARKER, and its message is printed, so the workerd test sees any
// run that reaches a stub. (zod's compile helpers and tiktoken stay quiet on purpose, see there.)
const LEFT_OUT = `${TRIM_MARKER}:left-out`;
const LEFT_OUT_MODULE = `
export function leftOut(what) {
  const error = new Error("${TRIM_MARKER}: " + what);
  console.error(error.message);
  return error;
}
`;
const importLeftOut = `import { leftOut } from "${LEFT_OUT}";`;
const LANGSMITH_CLIENT_STUB = `${importLeftOut}
const reason = (what) => leftOut("LangSmith tracing (" + what + ") is not part of the Cloudflare Workers build; trace from the Node, Deno or Bun server instead");
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
// turndown (HTML to Markdown, with domino, the DOM it falls back to where there is no DOMParser):
// only just-bash's html-to-markdown command imports it, and that command is trimmed.
const TURNDOWN_STUB = `${importLeftOut}
export default class TurndownService {
  constructor() {
    throw leftOut("html-to-markdown is not part of the Cloudflare Workers build (turndown and its HTML parser, domino, are left out)");
  }
}
`;
// The lc namespaces (@langchain/core's load/import_map.js keys) whose classes a checkpoint of this
// project holds: the state's messages (every message class is langchain_core/messages, ToolMessage
// also messages/tool), and what LangGraph's own values may carry (documents, outputs, prompt_values).
export const REVIVABLE_NAMESPACES = ["messages", "messages__tool", "documents", "outputs", "prompt_values"];
// @langchain/core/dist/load/import_map.js with only REVIVABLE_NAMESPACES' imports. The keys left out
// stay known: load() asks `key in map` (longest key first) and then reads it, so a left-out key
// answers `in` and its read throws the trim's reason, where a key no version knows still gets
// load()'s own "Invalid namespace". Throws if the file no longer has the shape read here.
export async function trimmedImportMap(path) {
  const source = await readFile(path, "utf8");
  const entries = [...source.matchAll(/^\t([A-Za-z0-9_]+): \(\) => ([A-Za-z0-9_$]+),?$/gm)].map((m) => ({ key: m[1], local: m[2] }));
  const imports = new Map();
  for (const m of source.matchAll(/^import \{ ([A-Za-z0-9_$]+)(?: as ([A-Za-z0-9_$]+))? \} from ("[^"]+");$/gm)) imports.set(m[2] ?? m[1], { name: m[1], from: m[3] });
  const kept = entries.filter((entry) => REVIVABLE_NAMESPACES.includes(entry.key));
  if (!source.includes("var import_map_exports") || entries.length < 20 || kept.length !== REVIVABLE_NAMESPACES.length || kept.some((entry) => !imports.has(entry.local))) {
    throw new Error(`${TRIM_MARKER}: ${path} no longer has the shape scripts/build-worker.mjs trims (keys ${REVIVABLE_NAMESPACES.join(", ")} and their imports); update trimmedImportMap`);
  }
  const leftOutKeys = entries.filter((entry) => !REVIVABLE_NAMESPACES.includes(entry.key)).map((entry) => entry.key);
  return `${importLeftOut}
${kept.map(({ local }) => `import { ${imports.get(local).name} as ${local} } from ${imports.get(local).from};`).join("\n")}
const kept = { ${kept.map(({ key, local }) => `${key}: ${local}`).join(", ")} };
const leftOutKeys = new Set(${JSON.stringify(leftOutKeys)});
export const import_map_exports = new Proxy(kept, {
  has: (target, key) => key in target || leftOutKeys.has(key),
  get(target, key) {
    if (typeof key === "string" && leftOutKeys.has(key)) {
      throw leftOut("reviving a serialized langchain_core/" + key.replaceAll("__", "/") + " object (a checkpoint's value) is not part of the Cloudflare Workers build; it revives ${REVIVABLE_NAMESPACES.map((key) => key.replaceAll("__", "/")).join(", ")}");
    }
    return target[key];
  },
});
`;
}
// just-bash's commands the Workers build leaves out, with the reason each answers when called.
export const TRIMMED_COMMANDS = {
  file: "its file-type database is left out",
  "html-to-markdown": "its HTML parser is left out",
  curl: "the sandbox has no network (curl is only registered when just-bash is given network access, which deerflow-edge never does)",
};
// just-bash's browser bundle (dist/bundle/browser.js) is one minified ESM file: each module of it
// sits in a lazy init, `var x=H(()=>{...})` with H the bundler's `(e,t)=>()=>(e&&(t=e(e=0)),t)`,
// and each command is an entry `{name:"echo",load:async()=>(await Promise.resolve().then(()=>(
// init(),module))).echoCommand}`. esbuild keeps every init, not knowing H is pure: marking each
// call /* @__PURE__ */ lets it drop the modules nothing reaches, and each trimmed command's entry
// loads a stub instead. Throws when the file no longer has that shape (a just-bash upgrade), rather
// than ship it untrimmed or broken.
export function trimmedJustBash(source, path) {
  const fail = (what) => {
    throw new Error(`${TRIM_MARKER}: ${path} no longer has the shape scripts/build-worker.mjs trims (${what}); update trimmedJustBash`);
  };
  const helpers = [...source.matchAll(/var ([A-Za-z_$][\w$]*)=\(e,t\)=>\(\)=>\(e&&\(t=e\(e=0\)\),t\)/g)];
  if (helpers.length !== 1) fail(`${helpers.length} lazy-init helpers`);
  const helper = helpers[0][1].replaceAll("$", "\\$");
  let inits = 0;
  let out = source.replace(new RegExp(`([=,])${helper}\\(\\(\\)=>\\{`, "g"), (_, before) => {
    inits += 1;
    return `${before}/* @__PURE__ */${helpers[0][1]}(()=>{`;
  });
  if (inits < 100) fail(`${inits} lazy inits`);
  const commandEntry = /\{name:"([a-z0-9._-]+)",load:async\(\)=>\(await Promise\.resolve\(\)\.then\(\(\)=>\([A-Za-z_$][\w$]*\(\),[A-Za-z_$][\w$]*\)\)\)\.[A-Za-z_$][\w$]*\}/g;
  const found = new Set();
  out = out.replace(commandEntry, (entry, name) => {
    found.add(name);
    if (!Object.hasOwn(TRIMMED_COMMANDS, name)) return entry;
    return `{name:${JSON.stringify(name)},load:async()=>__deerflowTrimmedCommand(${JSON.stringify(name)},${JSON.stringify(TRIMMED_COMMANDS[name])})}`;
  });
  for (const name of ["echo", "grep", "sed", "awk", "jq", ...Object.keys(TRIMMED_COMMANDS)]) if (!found.has(name)) fail(`no command entry for ${name}`);
  return `${out}
function __deerflowTrimmedCommand(name, why) {
  return {
    name,
    async execute() {
      const message = name + ": ${TRIM_MARKER}: the " + name + " command is not part of the Cloudflare Workers build (" + why + ")";
      console.error(message);
      return { stdout: "", stderr: message + "\\n", exitCode: 127 };
    },
  };
}
`;
}
// zod's z.compile (core/compile.js): generates each schema's parser as code, run with new Function,
// which workerd refuses; there compile() already hands the schema back on the runtime parser. The
// stub does the same, without the code generator; nothing of the chain calls it.
const ZOD_COMPILE_STUB = `
const reason = (what) => "${TRIM_MARKER}: zod's " + what + " (a schema compiled to code) is not part of the Cloudflare Workers build, where new Function is refused anyway";
export const INVALID = Symbol.for("zod.compile.invalid");
export class ZodCompileAsyncError extends Error {
  constructor(message = "z.compile does not support async refinements, transforms, or checks") { super(message); this.name = "ZodCompileAsyncError"; }
}
export class ZodCompileUnsupportedError extends Error {
  constructor(feature, islandable = true) { super("z.compile does not support " + feature + "; this schema must use the runtime parser"); this.name = "ZodCompileUnsupportedError"; this.islandable = islandable; }
}
export function compile(schema, options) {
  if (options?.strict) throw new ZodCompileUnsupportedError(reason("compile"));
  return schema;
}
export function withParser() { throw new Error(reason("withParser")); }
export function compileFn() { throw new Error(reason("compileFn")); }
`;
// zod's z.fromJSONSchema (a zod schema built from a JSON Schema): LangChain turns zod schemas into
// JSON Schema, never back; no tool, MCP client or config path of the chain calls it.
const ZOD_FROM_JSON_SCHEMA_STUB = `${importLeftOut}
export function fromJSONSchema() {
  throw leftOut("zod's fromJSONSchema is not part of the Cloudflare Workers build");
}
`;
// @langchain/core's sax-js, the XML parser of XMLOutputParser (output_parsers/xml.js), which
// output_parsers/index.js imports for its side effects; the chain parses no model output as XML.
const SAX_STUB = `${importLeftOut}
export const sax = {
  parser() {
    throw leftOut("XMLOutputParser is not part of the Cloudflare Workers build (its XML parser, sax-js, is left out)");
  },
};
`;
// The MCP SDK's OAuth client (client/auth.js, with the OAuth metadata schemas of shared/auth.js
// and pkce-challenge): its transports call auth() only when given an authProvider, which
// src/mcp/client.ts never passes (an MCP server's headers come from config). The stub keeps, as
// the SDK writes them (read from the file, so an upgrade cannot leave a stale copy),
// UnauthorizedError and extractWWWAuthenticateParams, which the SSE transport reads on any 401;
// auth() throws the trim's reason. Throws when the file no longer has those functions.
export async function trimmedMcpAuth(path) {
  const source = await readFile(path, "utf8");
  const take = (start) => {
    const at = source.indexOf(start);
    const end = source.indexOf("\n}\n", at);
    if (at === -1 || end === -1) throw new Error(`${TRIM_MARKER}: ${path} no longer has \`${start}\` (scripts/build-worker.mjs trims it); update trimmedMcpAuth`);
    return source.slice(at, end + 3);
  };
  return `${importLeftOut}
${take("export class UnauthorizedError extends Error {")}
${take("export function extractWWWAuthenticateParams(res) {")}
${take("function extractFieldFromWwwAuth(response, fieldName) {")}
export async function auth() {
  throw leftOut("MCP OAuth (an authProvider) is not part of the Cloudflare Workers build; give the server's token in its headers");
}
`;
}
// @langchain/core's tiktoken (utils/tiktoken.js, js-tiktoken's encoder, whose ranks it fetches
// from tiktoken.pages.dev): only BaseLanguageModel.getNumTokens and calculateMaxTokens use it, and
// both fall back to an approximate count (characters / 4) when it fails; no path of the chain
// calls them (the summarization middleware counts tokens itself).
const TIKTOKEN_STUB = `
const reason = () => new Error("${TRIM_MARKER}: tiktoken token counting is not part of the Cloudflare Workers build; counts are approximate (characters / 4)");
export async function getEncoding() { throw reason(); }
export async function encodingForModel() { throw reason(); }
export const tiktoken_exports = { encodingForModel, getEncoding };
`;
// @langchain/core's runnables/graph_mermaid.js: Graph.drawMermaid and drawMermaidPng (mermaid.ink);
// the gateway's graph routes answer the graph as JSON, never as a drawing.
const GRAPH_MERMAID_STUB = `${importLeftOut}
const reason = (what) => leftOut("drawing a graph (" + what + ") is not part of the Cloudflare Workers build");
export function drawMermaid() { throw reason("drawMermaid"); }
export async function drawMermaidImage() { throw reason("drawMermaidPng"); }
`;
// @langchain/core's messages/block_translators/index.js with only KEPT_TRANSLATORS' imports; the
// registry stays on globalThis as the file keeps it (a provider package registers there), and
// getTranslator reports the first read of each left-out provider (it then answers undefined, as for
// a provider no translator knows: the generic path). Throws if the file no longer has that shape.
export const KEPT_TRANSLATORS = ["openai"];
export async function trimmedBlockTranslators(path) {
  const source = await readFile(path, "utf8");
  const imports = new Map([...source.matchAll(/^import \{ ([A-Za-z0-9_$]+) \} from ("\.\/[a-z0-9_]+\.js");$/gm)].map((m) => [m[1], m[2]]));
  const entries = [...source.matchAll(/^\t\["([a-z0-9-]+)", ([A-Za-z0-9_$]+)\],?$/gm)].map((m) => ({ provider: m[1], local: m[2] }));
  const kept = entries.filter((entry) => KEPT_TRANSLATORS.includes(entry.provider));
  const registry = source.includes("globalThis.lc_block_translators_registry ??=");
  const reader = /function getTranslator\(modelProvider\) \{\n\treturn globalThis\.lc_block_translators_registry\.get\(modelProvider\);\n\}/.test(source);
  const entriesFound = entries.length >= 5 && kept.length === KEPT_TRANSLATORS.length && entries.every((entry) => imports.has(entry.local));
  if (!registry || !reader || !entriesFound) {
    throw new Error(`${TRIM_MARKER}: ${path} no longer has the shape scripts/build-worker.mjs trims (a registry of ${KEPT_TRANSLATORS.join(", ")} and others, read by getTranslator); update trimmedBlockTranslators`);
  }
  const leftOutProviders = entries.filter((entry) => !KEPT_TRANSLATORS.includes(entry.provider)).map((entry) => entry.provider);
  return `${importLeftOut}
${kept.map(({ local }) => `import { ${local} } from ${imports.get(local)};`).join("\n")}
globalThis.lc_block_translators_registry ??= new Map([${kept.map(({ provider, local }) => `[${JSON.stringify(provider)}, ${local}]`).join(", ")}]);
const leftOutProviders = new Set(${JSON.stringify(leftOutProviders)});
function getTranslator(modelProvider) {
  const translator = globalThis.lc_block_translators_registry.get(modelProvider);
  if (translator === undefined && leftOutProviders.delete(modelProvider)) {
    leftOut("the " + modelProvider + " content-block translator is not part of the Cloudflare Workers build; " + modelProvider + " messages' content blocks are read as a provider-less message's");
  }
  return translator;
}
export { getTranslator };
`;
}
// @langchain/core's js-sha256: only the model response cache's default key encoder hashes with it.
const SHA256_STUB = `${importLeftOut}
export const sha256 = () => {
  throw leftOut("a model response cache (its sha256 keys) is not part of the Cloudflare Workers build; do not give the model \`cache\`");
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
    build.onLoad({ filter: /[\\/]zod[\\/]v4[\\/]core[\\/]compile\.js$/ }, () => ({ contents: ZOD_COMPILE_STUB, loader: "js" }));
    build.onLoad({ filter: /[\\/]zod[\\/]v4[\\/]classic[\\/]from-json-schema\.js$/ }, () => ({ contents: ZOD_FROM_JSON_SCHEMA_STUB, loader: "js" }));
    build.onLoad({ filter: /[\\/]@langchain[\\/]core[\\/]dist[\\/]utils[\\/]sax-js[\\/]sax\.js$/ }, () => ({ contents: SAX_STUB, loader: "js" }));
    build.onLoad({ filter: /[\\/]@langchain[\\/]core[\\/]dist[\\/]utils[\\/]tiktoken\.js$/ }, () => ({ contents: TIKTOKEN_STUB, loader: "js" }));
    build.onLoad({ filter: /[\\/]@langchain[\\/]core[\\/]dist[\\/]runnables[\\/]graph_mermaid\.js$/ }, () => ({ contents: GRAPH_MERMAID_STUB, loader: "js" }));
    build.onLoad({ filter: /[\\/]@langchain[\\/]core[\\/]dist[\\/]messages[\\/]block_translators[\\/]index\.js$/ }, async (args) => ({
      contents: await trimmedBlockTranslators(args.path),
      resolveDir: dirname(args.path),
      loader: "js",
    }));
    build.onLoad({ filter: /[\\/]@langchain[\\/]core[\\/]dist[\\/]utils[\\/]js-sha256[\\/]hash\.js$/ }, () => ({ contents: SHA256_STUB, loader: "js" }));
    build.onLoad({ filter: /[\\/]langsmith[\\/]lib[\\/]client\.mjs$/ }, () => ({ contents: LANGSMITH_CLIENT_STUB, loader: "js" }));
    build.onLoad({ filter: /[\\/]langsmith[\\/]lib[\\/]index\.mjs$/ }, async (args) => {
      const source = await readFile(args.path, "utf8");
      const line = /^export \{ Cache, PromptCache, configureGlobalPromptCache, promptCacheSingleton, \} from "\.\/utils\/prompt_cache\/index\.mjs";$/m;
      if (!line.test(source)) throw new Error(`${TRIM_MARKER}: ${args.path} no longer re-exports the prompt cache as scripts/build-worker.mjs trims it; update the langsmith trim`);
      return { contents: source.replace(line, ""), resolveDir: dirname(args.path), loader: "js" };
    });
    build.onLoad({ filter: /[\\/]langsmith[\\/]index\.mjs$/ }, (args) => ({
      contents: 'export * from "./lib/index.mjs";\n',
      resolveDir: dirname(args.path),
      loader: "js",
    }));
    build.onLoad({ filter: /[\\/]@modelcontextprotocol[\\/]sdk[\\/]dist[\\/]esm[\\/]client[\\/]auth\.js$/ }, async (args) => ({
      contents: await trimmedMcpAuth(args.path),
      loader: "js",
    }));
    build.onLoad({ filter: /[\\/]@modelcontextprotocol[\\/]sdk[\\/]dist[\\/]esm[\\/]validation[\\/]ajv-provider\.js$/ }, (args) => ({
      contents: 'export { CfWorkerJsonSchemaValidator as AjvJsonSchemaValidator } from "./cfworker-provider.js";\n',
      resolveDir: dirname(args.path),
      loader: "js",
    }));
    build.onLoad({ filter: /[\\/]@langchain[\\/]core[\\/]dist[\\/]load[\\/]import_map\.js$/ }, async (args) => ({
      contents: await trimmedImportMap(args.path),
      resolveDir: dirname(args.path),
      loader: "js",
    }));
    build.onLoad({ filter: /[\\/]just-bash[\\/]dist[\\/]bundle[\\/]browser\.js$/ }, async (args) => ({
      contents: trimmedJustBash(await readFile(args.path, "utf8"), args.path),
      loader: "js",
      resolveDir: dirname(args.path),
    }));
    build.onResolve({ filter: /^turndown$/ }, (args) => (/[\\/]just-bash[\\/]/.test(args.importer) ? { path: "turndown-stub", namespace: TRIM_MARKER } : undefined));
    build.onLoad({ filter: /^turndown-stub$/, namespace: TRIM_MARKER }, () => ({ contents: TURNDOWN_STUB, loader: "js" }));
    build.onResolve({ filter: new RegExp(`^${LEFT_OUT}$`) }, () => ({ path: "left-out", namespace: TRIM_MARKER }));
    build.onLoad({ filter: /^left-out$/, namespace: TRIM_MARKER }, () => ({ contents: LEFT_OUT_MODULE, loader: "js" }));
  },
};

/*
 * A second minification of each module esbuild wrote, with oxc's minifier (rolldown/utils; rolldown
 * is a devDependency, pinned at the version vite brings): measured on this bundle, esbuild's own
 * minify leaves 2.8 MB raw at 839.6 KB gzip and oxc's, over the same output, 2.8 MB at 804.7 KB
 * (4% less gzip for 1-2% less raw: the gain is in how the output compresses; which part of oxc's
 * output does it was not measured); esbuild unminified then oxc, or terser (807 KB, 35 s), do no better. It
 * takes about 1.5 s. esbuild still bundles (the tool, and what the trims above hook into);
 * oxc only rewrites each finished module, keeping its imports and exports. A module oxc reports an
 * error for stops the build.
 */
async function reminify(path) {
  const code = await readFile(path, "utf8");
  const result = await minify(path, code, { module: true, compress: { target: "es2022" }, mangle: { toplevel: true } });
  if (result.errors?.length) throw new Error(`build-worker: oxc could not minify ${path}: ${result.errors.map((error) => error.message).join("; ")}`);
  await writeFile(path, result.code);
}

/**
 * Bundles the Worker (or another entry, built the same way: a test's probe) into `outdir`; resolves to its modules (relative to `outdir`, the entry
 * first) and esbuild's metafile (what each input adds to each module).
 */
export async function buildWorker(outdir = DEFAULT_WORKER_OUTDIR, entry = WORKER_ENTRY) {
  const result = await build({
    entryPoints: [entry],
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
  for (const module of modules) await reminify(join(resolve(outdir), module));
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
  const entry = option("--entry");
  const { modules, metafile } = await buildWorker(outdir, entry ? resolve(entry) : WORKER_ENTRY);
  const meta = option("--metafile");
  if (meta) await writeFile(meta, JSON.stringify(metafile));
  for (const module of modules) console.log(module);
}
