#!/usr/bin/env bash
# npm test: type-check, the whole vitest suite on Node (plus the official LangGraph checkpoint
# conformance suite against our KeyValue checkpointer over memory and fs, and inside Deno over Deno
# KV), then test/portable/ inside Deno and Bun.
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
run node vitest run
run checkpoint vitest run -c vitest.checkpoint.config.ts
run checkpoint-deno-kv env CHECKPOINT_STORE=deno-kv deno run -A --unstable-kv --unstable-no-legacy-abort node_modules/vitest/vitest.mjs run -c vitest.checkpoint.config.ts
run deno deno run -A --unstable-kv --unstable-no-legacy-abort node_modules/vitest/vitest.mjs run test/portable
run bun bun --bun vitest run test/portable

tp=0; tf=0
for rt in node checkpoint checkpoint-deno-kv deno bun; do
  line=$(node -e '
    const fs = require("fs");
    try {
      const r = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
      const failed = r.numFailedTests + (r.success ? 0 : (r.numFailedTests ? 0 : 1));
      console.log(r.numPassedTests + " " + failed);
    } catch { console.log("0 1"); }
  ' ".reports/vitest-$rt.json")
  set -- $line
  tp=$((tp + $1)); tf=$((tf + $2))
  echo "$rt: $1 passed, $2 failed"
done
[ $status -ne 0 ] && [ $tf -eq 0 ] && tf=1
echo "$tp passed, $tf failed"
exit $status
