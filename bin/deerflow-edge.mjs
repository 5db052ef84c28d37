#!/usr/bin/env node
// The npm bin runs the Node adapter's CLI. From the installed package (and from a checkout after
// `npm run build`) that is the compiled dist/, on plain Node. A source checkout without a build
// falls back to the TypeScript through tsx's loader (Node 20 cannot strip types itself).
// On Deno or Bun run adapters/<runtime>/cli.ts (or dist/adapters/<runtime>/cli.js) directly.
import { existsSync } from "node:fs";
import module from "node:module";

// Node 22.1+ keeps compiled code between starts (most of a start is compiling modules); Node 20 has no such cache.
module.enableCompileCache?.();

const built = new URL("../dist/adapters/node/cli.js", import.meta.url);
if (existsSync(built)) {
  await import(built.href);
} else {
  const { register } = await import("tsx/esm/api");
  register();
  await import("../adapters/node/cli.ts");
}
