#!/usr/bin/env bash
# npm run bench: runs every bench (bench/chain-overhead.ts, bench/tool-side.ts, bench/delegation.ts,
# bench/extensions.ts, bench/gateway.ts, bench/uploads.ts, bench/crash-journal.ts, bench/gateway-limits.ts,
# bench/sandbox-runaway.ts, bench/cli-start.ts, bench/worker-bundle.ts, bench/cluster.ts) under Node (tsx),
# Deno and Bun, one after the other; bench/cluster.ts (gateway workers over one PostgreSQL, which it
# starts and drives from Node) only under Node. Every JSON line is echoed and appended to
# bench/results/<bench>-<UTC date>.jsonl (git-ignored).
# A run that fails (non-zero exit, or no summary line) makes the script exit non-zero, but the
# other runs still happen. Progress of each run goes to stderr.
# Knobs (environment): BENCH_SAMPLES, BENCH_BLOCK_MS, BENCH_WARMUP_MS, BENCH_RUNTIMES="node deno bun",
# BENCH_NAMES="chain-overhead tool-side extensions delegation gateway uploads crash-journal gateway-limits sandbox-runaway cli-start worker-bundle cluster" (which benches); each bench documents its own extra knobs.
# bench/soak.ts (memory over 10 bursts of 200 streamed runs, about 10-20 min per runtime) runs only when named:
# BENCH_NAMES=soak; under each runtime it soaks that runtime's serve CLI.
# bench/gateway.ts installs its baseline server's separate npm folder on first use
# (npm ci --prefix bench/lgapi); if that fails it prints {"skipped":"lgapi",...} and measures the rest.
set -u
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"

mkdir -p bench/results
date_tag=$(date -u +%Y-%m-%d)

# --expose-gc (Node, Deno) lets a bench collect garbage between timed blocks; Bun has Bun.gc.
# Deno resolves bare specifiers from the npm-installed node_modules (deno.json: nodeModulesDir
# "manual"); -A covers the sys access langsmith needs (docs/toolchain.md, Deno permissions for
# langsmith); --unstable-no-legacy-abort keeps Deno.serve from aborting a request's signal after its
# response (docs/toolchain.md, Deno's legacy abort), as adapters/deno/serve.ts asks of every server
# (bench/gateway.ts serves one).
run_node() { tsx --expose-gc "$1"; }
run_deno() { deno run -A --unstable-no-legacy-abort --v8-flags=--expose-gc "$1"; }
run_bun() { bun "$1"; }

status=0
failed=()
outs=()
for name in ${BENCH_NAMES:-chain-overhead tool-side extensions delegation gateway uploads crash-journal gateway-limits sandbox-runaway cli-start worker-bundle cluster}; do
  bench="bench/$name.ts"
  out="bench/results/$name-$date_tag.jsonl"
  outs+=("$out")
  if [ ! -f "$bench" ]; then
    echo "=== $bench not found" >&2
    status=1
    failed+=("$name")
    continue
  fi
  for rt in ${BENCH_RUNTIMES:-node deno bun}; do
    # Its workers are separate processes (Node through the real CLI); the driver itself is Node-only.
    if [ "$name" = cluster ] && [ "$rt" != node ]; then
      echo "=== $name runs under node only; skipped on $rt" >&2
      continue
    fi
    echo "=== $name on $rt" >&2
    tmp=$(mktemp)
    "run_$rt" "$bench" >"$tmp"
    rc=$?
    grep '^{' "$tmp" | tee -a "$out"
    if [ $rc -ne 0 ] || ! grep -q '"summary":true' "$tmp"; then
      echo "=== $name on $rt FAILED (exit $rc)" >&2
      status=1
      failed+=("$name/$rt")
    fi
    rm -f "$tmp"
  done
done

echo "=== results appended to ${outs[*]}" >&2
[ $status -ne 0 ] && echo "=== failed: ${failed[*]}" >&2
exit $status
