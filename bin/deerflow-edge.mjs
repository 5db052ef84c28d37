#!/usr/bin/env node
// The npm bin runs the Node adapter's CLI. Node 20 cannot strip TypeScript types itself, so tsx
// registers its loader first; on Deno or Bun run adapters/<runtime>/cli.ts directly.
import { register } from "tsx/esm/api";

register();
await import("../adapters/node/cli.ts");
