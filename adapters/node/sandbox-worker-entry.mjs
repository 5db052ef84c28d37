// The virtual sandbox worker on Node from the sources (adapters/node/sandbox-worker.ts starts it;
// the build runs sandbox-worker-entry.js instead). Node 20 cannot strip TypeScript types itself
// and a worker does not inherit the main thread's loader, so tsx registers here. just-bash loads
// first, natively: through tsx's hooks its bundle takes about three times as long.
import "just-bash";
import { register } from "tsx/esm/api";

register();
await import("./sandbox-worker-entry.ts");
