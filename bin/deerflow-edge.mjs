#!/usr/bin/env node
// The npm bin runs the Node adapter's CLI. From the installed package that is
// dist/bin/deerflow-edge.mjs, the compiled CLI bundled into one file with its dependencies, because
// Node 20 spends most of a start resolving and compiling about a thousand separate modules (2 s
// against 1 s here); without it, the compiled dist/adapters/node/cli.js. A source checkout runs the
// TypeScript through tsx's loader (Node 20 cannot strip types itself). On Deno or Bun run
// adapters/<runtime>/cli.ts (or dist/adapters/<runtime>/cli.js).
import { existsSync } from "node:fs";
import module from "node:module";

// Node 22.1+ keeps compiled code between starts; Node 20 has no such cache.
module.enableCompileCache?.();

const bundle = new URL("../dist/bin/deerflow-edge.mjs", import.meta.url);
const built = new URL("../dist/adapters/node/cli.js", import.meta.url);
// A source checkout (src/ is not in the package) runs its sources, so a build left from an
// earlier `npm pack` never shadows an edit.
const checkout = existsSync(new URL("../src/index.ts", import.meta.url));
if (checkout) {
  const { register } = await import("tsx/esm/api");
  register();
  await import("../adapters/node/cli.ts");
} else if (existsSync(bundle)) {
  await import(bundle.href);
} else if (existsSync(built)) {
  await import(built.href);
} else {
  throw new Error("deerflow-edge: this package has no build (dist/); reinstall it, or run `npm run build` in a checkout.");
}
