// Deno runs the suites in vitest's threads pool (test/vitest-pool.ts): its forks pool would start every test
// file with `deno run -A` (Deno's child_process.fork grants the child all permissions), so the
// narrow flags in scripts/test-all.sh would hold for the runner only. Deno's parentPort leaves
// removeAllListeners unimplemented (it throws ERR_NOT_IMPLEMENTED), and vitest calls it once a
// file is done, right before the pool terminates the worker; a no-op loses nothing there.
import { parentPort } from "node:worker_threads";

if (parentPort) {
  try {
    parentPort.removeAllListeners("deerflow-probe");
  } catch {
    parentPort.removeAllListeners = function removeAllListeners() {
      return this;
    };
  }
}
