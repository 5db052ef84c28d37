// `deerflow-edge` as one executable file (Bun's --compile): the Bun CLI plus the virtual
// sandbox's worker entry, which a compiled binary can only start when it was compiled in.
//   node scripts/build-binary.mjs [--outfile dist/deerflow-edge] [--target bun-linux-x64 ...]
// The worker entry is named "[name].[ext]" so it sits at the root of the binary's embedded
// folder: web-sandbox-worker.ts asks for "./web-sandbox-worker-entry.ts" relative to the bundle,
// which Bun maps to the compiled web-sandbox-worker-entry.js there.
// External: just-bash's optional native compressors (zstd, xz), which it imports lazily and does
// without (the command says the codec is missing); nothing else is left outside the file.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** The arguments of `bun build` that compile the CLI into `outfile`. */
export function binaryBuildArgs(outfile, extra = []) {
  return [
    "build",
    "--compile",
    "--minify",
    join(root, "adapters/bun/cli.ts"),
    join(root, "adapters/shared/web-sandbox-worker-entry.ts"),
    "--entry-naming",
    "[name].[ext]",
    "--external",
    "@mongodb-js/zstd",
    "--external",
    "node-liblzma",
    "--outfile",
    resolve(outfile),
    ...extra,
  ];
}

/** The bun executable of this checkout's devDependencies, else the one on PATH. */
export function bunExecutable() {
  const local = join(root, "node_modules/.bin", process.platform === "win32" ? "bun.exe" : "bun");
  return existsSync(local) ? local : "bun";
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const at = args.indexOf("--outfile");
  const outfile = at === -1 ? join(root, "dist/deerflow-edge") : args[at + 1];
  const extra = at === -1 ? args : [...args.slice(0, at), ...args.slice(at + 2)];
  if (!outfile) {
    console.error("build-binary: --outfile needs a path (for example --outfile dist/deerflow-edge)");
    process.exit(2);
  }
  const result = spawnSync(bunExecutable(), binaryBuildArgs(outfile, extra), { cwd: root, stdio: "inherit" });
  process.exit(result.status ?? 1);
}
