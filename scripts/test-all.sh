#!/usr/bin/env bash
# npm test: type-check, the whole vitest suite on Node (plus the official LangGraph checkpoint
# conformance suite against our KeyValue checkpointer over memory and fs, and inside Deno over Deno
# KV, and the cluster suite: PostgreSQL and gateway workers on Node, Deno and Bun behind a proxy),
# then test/portable/ inside Deno and Bun.
# Prints "<runtime>: N passed, N failed" per runtime and a closing "N passed, N failed" line summed
# over the runtimes; exits non-zero if the type check or any runtime failed.
set -u
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"
mkdir -p .reports
rm -f .reports/vitest-*.json
status=0

echo "=== typecheck"
if ! tsc -p .; then
  echo "typecheck: failed"
  status=1
fi

run() {
  local rt=$1; shift
  echo "=== $rt"
  "$@" --reporter=default --reporter=json --outputFile.json=".reports/vitest-$rt.json" || status=1
}
# Deno runs vitest with the narrowest permissions that work, never -A (each test file in a worker
# thread that keeps them, test/vitest-pool.ts):
#   --allow-read         unscoped, as on Deno Deploy: vite probes paths outside the checkout (it
#                        walks up to / looking for a workspace root, and tries a root-relative id
#                        such as /test/x.ts at the filesystem root first), and Deno throws on a path
#                        it may not read where Node answers "not found", so any scope turns those
#                        probes into failures (and the local sandbox's tests read from /)
#   --allow-write=<dirs> the temp folders the tests create and .reports/ for the JSON report; vitest
#                        writes nothing else: --configLoader native imports the config instead of
#                        bundling it to a file beside it
#   --allow-env          vitest, vite and the code under test read environment variables
#   --allow-net          the tests' servers on 127.0.0.1 and their clients (vite resolves localhost)
#   --allow-ffi=<dir>    vite's bundler (rolldown) loads its native binding from there
#   --allow-sys=...      what vitest and vite ask of node:os: osRelease, cpus, networkInterfaces, hostname
#   --unstable-kv        the deno-kv storage and checkpointer tests
#   __IS_WSL_TEST__=1    is-wsl (inside vite) would probe /proc/sys/fs/binfmt_misc at import, which
#                        Deno grants only under -A; set, it waits until asked (to open a browser)
# The files that start processes (DENO_SPAWNS) run apart, adding --allow-run (unscoped: they start
# bash, node, deno and the programs a local sandbox's commands name, and check the error for a
# program that does not exist) and an unscoped --allow-write (Deno.symlink takes no path-scoped
# grant; the local sandbox tests plant symlinks). A new test file that starts a process fails the
# first Deno pass with NotCapable until it is listed there.
deno_tmp=$(node -p 'require("os").tmpdir()')
deno_modules=$(cd node_modules && pwd -P)
deno_run=(env __IS_WSL_TEST__=1 deno run --unstable-kv --unstable-no-legacy-abort --allow-read --allow-env
  --allow-net --allow-ffi="$deno_modules/@rolldown" --allow-sys=osRelease,cpus,networkInterfaces,hostname)
DENO_SPAWNS=(test/portable/process-runner.test.ts test/portable/sandbox-contract.test.ts test/portable/mcp.test.ts
  test/portable/gateway/crash-durability.test.ts test/portable/gateway/deno-kv-cli.test.ts test/portable/gateway/many-runs-process.test.ts
  test/portable/gateway/deno-deploy.test.ts test/portable/gateway/cloudflare-worker.test.ts test/portable/gateway/worker-trims.test.ts)

run node vitest run
run checkpoint vitest run -c vitest.checkpoint.config.ts
run cluster vitest run -c vitest.cluster.config.ts
run checkpoint-deno "${deno_run[@]}" --allow-write="$deno_tmp,$PWD/.reports" node_modules/vitest/vitest.mjs run --configLoader native -c vitest.checkpoint.config.ts
run checkpoint-deno-kv env CHECKPOINT_STORE=deno-kv "${deno_run[@]}" --allow-write="$deno_tmp,$PWD/.reports" node_modules/vitest/vitest.mjs run --configLoader native -c vitest.checkpoint.config.ts
run checkpoint-bun bun --bun vitest run -c vitest.checkpoint.config.ts
run deno "${deno_run[@]}" --allow-write="$deno_tmp,$PWD/.reports" node_modules/vitest/vitest.mjs run --configLoader native test/portable "${DENO_SPAWNS[@]/#/--exclude=}"
run deno-spawn "${deno_run[@]}" --allow-write --allow-run node_modules/vitest/vitest.mjs run --configLoader native "${DENO_SPAWNS[@]}"
run bun bun --bun vitest run test/portable

tp=0; tf=0
for rt in node checkpoint cluster checkpoint-deno checkpoint-deno-kv checkpoint-bun deno deno-spawn bun; do
  line=$(node -e '
    const fs = require("fs");
    try {
      const r = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
      const failed = r.numFailedTests + (r.success ? 0 : (r.numFailedTests ? 0 : 1));
      console.log(r.numPassedTests + " " + failed);
      // Name each failure under the count, so a CI log that keeps only the summary still says which test broke.
      const firstLine = (text) => String(text ?? "").split("\n")[0].slice(0, 300);
      for (const file of r.testResults ?? []) {
        const name = file.name.replace(process.cwd() + "/", "");
        const failed = (file.assertionResults ?? []).filter((a) => a.status === "failed");
        if (file.status === "failed" && failed.length === 0) console.log("  FAILED " + name + ": " + firstLine(file.message));
        for (const a of failed) console.log("  FAILED " + name + " > " + a.fullName + ": " + firstLine((a.failureMessages ?? [])[0]));
      }
    } catch { console.log("0 1"); }
  ' ".reports/vitest-$rt.json")
  set -- $(head -n 1 <<<"$line")
  tp=$((tp + $1)); tf=$((tf + $2))
  echo "$rt: $1 passed, $2 failed"
  tail -n +2 <<<"$line"
done
[ $status -ne 0 ] && [ $tf -eq 0 ] && tf=1
echo "$tp passed, $tf failed"
exit $status
