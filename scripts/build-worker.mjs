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
 * What an edge deployment never runs stays out of the bundle, without changing what runs:
 * - zod's error messages in 40-odd languages (z.locales): LangChain and LangGraph reach zod for
 *   their schemas but never switch its locale; English, zod's default, stays.
 */
const edgeTrim = {
  name: "deerflow-edge-trim",
  setup(build) {
    build.onLoad({ filter: /[\\/]zod[\\/]v4[\\/]locales[\\/]index\.js$/ }, (args) => ({
      contents: 'export { default as en } from "./en.js";\n',
      resolveDir: dirname(args.path),
      loader: "js",
    }));
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
