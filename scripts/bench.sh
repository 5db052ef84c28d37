#!/usr/bin/env bash
# npm run bench: runs bench/chain-overhead.ts under Node (tsx), Deno and Bun, one after the other.
# Every JSON line is echoed and appended to bench/results/chain-overhead-<UTC date>.jsonl (git-ignored).
# A runtime that fails (non-zero exit, or no summary line) makes the script exit non-zero, but the
# other runtimes still run. Progress of each run goes to stderr.
# Knobs (environment): BENCH_SAMPLES, BENCH_BLOCK_MS, BENCH_WARMUP_MS, BENCH_RUNTIMES="node deno bun".
set -u
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"

mkdir -p bench/results
out="bench/results/chain-overhead-$(date -u +%Y-%m-%d).jsonl"
bench=bench/chain-overhead.ts

# --expose-gc (Node, Deno) lets the bench collect garbage between timed blocks; Bun has Bun.gc.
# Deno resolves bare specifiers from the npm-installed node_modules (deno.json: nodeModulesDir
# "manual"); -A covers the sys access langsmith needs (toolchain pitfall P4).
run_node() { tsx --expose-gc "$bench"; }
run_deno() { deno run -A --v8-flags=--expose-gc "$bench"; }
run_bun() { bun "$bench"; }

status=0
failed=()
for rt in ${BENCH_RUNTIMES:-node deno bun}; do
  echo "=== chain-overhead on $rt" >&2
  tmp=$(mktemp)
  "run_$rt" >"$tmp"
  rc=$?
  grep '^{' "$tmp" | tee -a "$out"
  if [ $rc -ne 0 ] || ! grep -q '"summary":true' "$tmp"; then
    echo "=== chain-overhead on $rt FAILED (exit $rc)" >&2
    status=1
    failed+=("$rt")
  fi
  rm -f "$tmp"
done

echo "=== results appended to $out" >&2
[ $status -ne 0 ] && echo "=== failed runtimes: ${failed[*]}" >&2
exit $status
