#!/usr/bin/env bash
# npm run bench: runs every bench (bench/chain-overhead.ts, bench/tool-side.ts, bench/delegation.ts,
# bench/extensions.ts, bench/gateway.ts, bench/uploads.ts, bench/crash-journal.ts, bench/gateway-limits.ts,
# bench/sandbox-runaway.ts, bench/cli-start.ts, bench/worker-bundle.ts, bench/profile.ts, bench/cluster.ts) under Node (tsx),
# Deno and Bun, one after the other; bench/cluster.ts (gateway workers over one PostgreSQL, which it
# starts and drives from Node) only under Node. Every JSON line is echoed and appended to
# bench/results/<bench>-<UTC date>.jsonl (git-ignored).
# A run that fails (non-zero exit, or no summary line) makes the script exit non-zero, but the
# other runs still happen. Progress of each run goes to stderr.
# Knobs (environment): BENCH_SAMPLES, BENCH_BLOCK_MS, BENCH_WARMUP_MS, BENCH_RUNTIMES="node deno bun",
# BENCH_NAMES="chain-overhead tool-side extensions delegation gateway uploads crash-journal gateway-limits sandbox-runaway cli-start worker-bundle profile cluster" (which benches); each bench documents its own extra knobs.
# bench/soak.ts (memory over 10 bursts of 200 streamed runs, about 10-20 min per runtime) runs only when named:
# BENCH_NAMES=soak; under each runtime it soaks that runtime's serve CLI.
# bench/gateway.ts installs its baseline server's separate npm folder on first use
# (npm ci --prefix bench/lgapi); if that fails it prints {"skipped":"lgapi",...} and measures the rest.
#
# --quick (npm run bench:quick, the regression guard of issue 18's goals; about 1.5 min on Node on
# an idle machine): bench/chain-overhead.ts (lead chain and bare engine only), bench/storage-writes.ts
# and bench/gateway.ts (10 and 50 clients, 4 s each, ours, langgraph-api with its bare graph and with
# our lead agent, and the in-process floor; no memory per idle thread, whose two waits
# for replay windows to close take 2 min more: BENCH_GATEWAY_IDLE_THREADS=20 adds it) with short knobs, on
# BENCH_RUNTIMES (default: node only); their JSON lines go to bench/results/quick-<UTC date>.jsonl
# only, and stdout gets bench/quick.ts's lines: each goal's figure, the goal, met true/false (null
# when not measured), then a summary line. Knobs given in the environment win over the quick ones.
set -u
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"

mkdir -p bench/results
date_tag=$(date -u +%Y-%m-%d)

quick=0
if [ "${1:-}" = "--quick" ]; then
  quick=1
  : "${BENCH_NAMES:=chain-overhead storage-writes gateway}"
  : "${BENCH_RUNTIMES:=node}"
  export BENCH_SAMPLES="${BENCH_SAMPLES:-7}" BENCH_BLOCK_MS="${BENCH_BLOCK_MS:-20}" BENCH_WARMUP_MS="${BENCH_WARMUP_MS:-100}"
  export BENCH_CHAIN_ONLY="${BENCH_CHAIN_ONLY:-lead}"
  export BENCH_GATEWAY_SECONDS="${BENCH_GATEWAY_SECONDS:-4}" BENCH_GATEWAY_WARMUP_SECONDS="${BENCH_GATEWAY_WARMUP_SECONDS:-1}"
  export BENCH_GATEWAY_CLIENTS="${BENCH_GATEWAY_CLIENTS:-10 50}" BENCH_GATEWAY_MEMORY_CLIENTS="${BENCH_GATEWAY_MEMORY_CLIENTS:-0}"
  export BENCH_GATEWAY_IDLE_THREADS="${BENCH_GATEWAY_IDLE_THREADS:-0}" BENCH_GATEWAY_IDLE_AFTER_SECONDS="${BENCH_GATEWAY_IDLE_AFTER_SECONDS:-62}"
  quick_out="bench/results/quick-$date_tag.jsonl"
  quick_lines=$(mktemp)
elif [ $# -gt 0 ]; then
  echo "usage: scripts/bench.sh [--quick]" >&2
  exit 2
fi

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
for name in ${BENCH_NAMES:-chain-overhead tool-side extensions delegation gateway uploads crash-journal gateway-limits sandbox-runaway cli-start worker-bundle profile cluster}; do
  bench="bench/$name.ts"
  out="bench/results/$name-$date_tag.jsonl"
  [ $quick = 1 ] && out=$quick_out
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
    if [ $quick = 1 ]; then
      grep '^{' "$tmp" | tee -a "$quick_lines" >>"$out"
    else
      grep '^{' "$tmp" | tee -a "$out"
    fi
    if [ $rc -ne 0 ] || ! grep -q '"summary":true' "$tmp"; then
      echo "=== $name on $rt FAILED (exit $rc)" >&2
      status=1
      failed+=("$name/$rt")
    fi
    rm -f "$tmp"
  done
done

if [ $quick = 1 ]; then
  # shellcheck disable=SC2086 # the runtimes are words
  tsx bench/quick.ts "$quick_lines" $BENCH_RUNTIMES | tee -a "$quick_out"
  if [ "${PIPESTATUS[0]}" -ne 0 ]; then
    status=1
    failed+=("goals")
  fi
  rm -f "$quick_lines"
  outs=("$quick_out")
fi
echo "=== results appended to $(printf '%s\n' "${outs[@]}" | sort -u | tr '\n' ' ')" >&2
[ $status -ne 0 ] && echo "=== failed: ${failed[*]}" >&2
exit $status
