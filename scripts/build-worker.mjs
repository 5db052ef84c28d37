// The Cloudflare Workers bundle: deploy/cloudflare-worker.ts and what it imports, as one ES module
// for workerd with nodejs_compat (node:* built-ins stay imports the runtime provides).
//   node scripts/build-worker.mjs [--outfile dist/worker/deerflow-edge-worker.mjs] [--metafile meta.json]
import { writeFile } from "node:fs/promises";
import { builtinModules } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const WORKER_ENTRY = join(root, "deploy/cloudflare-worker.ts");
export const DEFAULT_WORKER_OUTFILE = join(root, "dist/worker/deerflow-edge-worker.mjs");

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

/** Bundles the Worker into `outfile`; resolves to esbuild's metafile (what each input adds). */
export async function buildWorker(outfile = DEFAULT_WORKER_OUTFILE) {
  const result = await build({
    entryPoints: [WORKER_ENTRY],
    outfile: resolve(outfile),
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
  return result.metafile;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const option = (name) => {
    const at = args.indexOf(name);
    return at === -1 ? undefined : args[at + 1];
  };
  const outfile = option("--outfile") ?? DEFAULT_WORKER_OUTFILE;
  const metafile = await buildWorker(outfile);
  const meta = option("--metafile");
  if (meta) await writeFile(meta, JSON.stringify(metafile));
  console.log(outfile);
}
