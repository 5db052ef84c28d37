#!/usr/bin/env bash
# DeerFlow's own web UI, built from the fixture, served against this gateway and driven in Debian's
# Chromium by the UI's own @playwright/test. Run by .ci/run after `npm test`.
#   1. upstream's real-backend specs (frontend/tests/e2e-real-backend/, unchanged) with
#      test/ui/playwright.real-backend.config.ts: auth disabled, the replay model, the run seeder;
#   2. our journeys (test/ui/journeys.spec.ts) with test/ui/playwright.config.ts: session auth on.
# Each config starts its gateway (port 8001) and `next start` (port 3000) and stops them after.
# Prints "ui-e2e: N passed, N failed" and exits non-zero when a test failed. Reports, screenshots
# and traces of failures, and metrics.jsonl go to .reports/ui-e2e/.
#
# Environment: DEERFLOW_UI_DIR (the UI fixture: frontend/ and backend/; default
# ../shared/fixtures/deerflow-ui from the checkout), DEERFLOW_UI_CACHE (where the UI is copied and
# built; default ~/.cache/deerflow-edge/deerflow-ui), CHROMIUM_PATH (default /usr/bin/chromium),
# UI_E2E_SUITES ("real-backend journeys", the default, or one of them).
set -euo pipefail
started=$(date +%s)
root="$(cd "$(dirname "$0")/.." && pwd)"
ui_src="${DEERFLOW_UI_DIR:-$root/../shared/fixtures/deerflow-ui}"
if [ -z "${DEERFLOW_UI_DIR:-}" ] && [ ! -d "$ui_src" ]; then
  # A git worktree elsewhere: the fixture sits beside the main checkout.
  main_checkout="$(dirname "$(git -C "$root" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || echo "$root/.git")")"
  ui_src="$main_checkout/../shared/fixtures/deerflow-ui"
fi
# Outside the checkout on purpose: Next infers its workspace root from the outermost lockfile above
# the app, and inside this checkout that is our package-lock.json (and a symlinked node_modules
# there makes Turbopack refuse the build outright).
cache="${DEERFLOW_UI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deerflow-edge/deerflow-ui}"
reports="$root/.reports/ui-e2e"
gateway_url="http://127.0.0.1:8001"
pnpm="pnpm@10.26.2"
chromium="${CHROMIUM_PATH:-/usr/bin/chromium}"
suites="${UI_E2E_SUITES:-real-backend journeys}"
export CHROMIUM_PATH="$chromium"

say() { echo "ui-e2e: $*"; }
elapsed() { echo "$(( $(date +%s) - started ))s"; }

if [ ! -d "$ui_src/frontend" ]; then
  echo "ui-e2e: no UI at $ui_src/frontend; set DEERFLOW_UI_DIR to the folder holding frontend/ and backend/" >&2
  exit 1
fi

# --- Chromium (Debian's package; Playwright's own download is not used)
if [ ! -x "$chromium" ]; then
  say "installing chromium"
  sudo=""
  if [ "$(id -u)" != "0" ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
fi

# --- The UI: copied to the cache, installed and built once per source and gateway address
source_hash=$(cd "$ui_src" && find . -type f -not -path '*/node_modules/*' -not -path './frontend/.next/*' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
stamp="$source_hash $gateway_url $pnpm"
lock_hash=$(sha256sum "$ui_src/frontend/pnpm-lock.yaml" | cut -d' ' -f1)
mkdir -p "$cache/frontend"
if [ "$(cat "$cache/.build-stamp" 2>/dev/null || true)" != "$stamp" ] || [ ! -f "$cache/frontend/.next/BUILD_ID" ]; then
  say "copying the UI from $ui_src to $cache"
  rm -f "$cache/.build-stamp"
  # Everything but node_modules goes: the copy then holds exactly the source, and an unchanged lockfile keeps its install.
  find "$cache" -mindepth 1 -maxdepth 1 ! -name frontend ! -name .install-stamp -exec rm -rf {} +
  find "$cache/frontend" -mindepth 1 -maxdepth 1 ! -name node_modules -exec rm -rf {} +
  cp -a "$ui_src/." "$cache/"
  if [ "$(cat "$cache/.install-stamp" 2>/dev/null || true)" != "$lock_hash" ] || [ ! -d "$cache/frontend/node_modules" ]; then
    say "installing the UI's packages ($pnpm install --frozen-lockfile)"
    t=$(date +%s)
    (cd "$cache/frontend" && npx -y "$pnpm" install --frozen-lockfile --reporter=append-only) >"$cache/install.log" 2>&1 || { tail -40 "$cache/install.log"; exit 1; }
    echo "$lock_hash" >"$cache/.install-stamp"
    say "installed in $(( $(date +%s) - t ))s"
  fi
  say "building the UI (next build, gateway $gateway_url baked into its rewrites)"
  t=$(date +%s)
  # NEXT_PUBLIC_* unset: the browser stays same-origin and Next's rewrites forward /api/* to the gateway.
  (cd "$cache/frontend" && env -u NEXT_PUBLIC_BACKEND_BASE_URL -u NEXT_PUBLIC_LANGGRAPH_BASE_URL \
    SKIP_ENV_VALIDATION=1 NEXT_TELEMETRY_DISABLED=1 DEER_FLOW_INTERNAL_GATEWAY_BASE_URL="$gateway_url" \
    ./node_modules/.bin/next build) >"$cache/build.log" 2>&1 || { tail -60 "$cache/build.log"; exit 1; }
  echo "$stamp" >"$cache/.build-stamp"
  say "built in $(( $(date +%s) - t ))s"
else
  say "reusing the UI build in $cache (source and gateway address unchanged)"
fi

# --- Our Playwright configs and journeys, beside the UI's own so @playwright/test is the UI's copy
front="$cache/frontend"
rm -rf "$front/tests/deerflow-edge"
mkdir -p "$front/tests/deerflow-edge"
cp "$root/test/ui/playwright.real-backend.config.ts" "$front/playwright.deerflow-edge.real-backend.config.ts"
cp "$root/test/ui/playwright.config.ts" "$front/playwright.deerflow-edge.config.ts"
cp "$root"/test/ui/*.spec.ts "$front/tests/deerflow-edge/"

# Both suites serve the gateway on 8001 and the UI on 3000; a suite's servers take a few seconds
# to stop (the gateway drains its runs), so each suite waits for the ports before it starts.
wait_for_free_ports() {
  local port tries
  for port in 8001 3000; do
    for tries in $(seq 1 30); do
      (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || continue 2
      sleep 1
    done
    echo "ui-e2e: port $port is in use; stop what holds it" >&2
    return 1
  done
}

rm -rf "$reports"
mkdir -p "$reports"
export DEERFLOW_EDGE_ROOT="$root" UI_E2E_REPORTS="$reports" CI=1
unset NEXT_PUBLIC_BACKEND_BASE_URL NEXT_PUBLIC_LANGGRAPH_BASE_URL DEER_FLOW_AUTH_DISABLED

runner=""
cleanup() {
  # Playwright stops the servers it started; this stops Playwright (and so them) if we are interrupted.
  if [ -n "$runner" ] && kill -0 "$runner" 2>/dev/null; then kill -TERM -- "-$runner" 2>/dev/null || true; wait "$runner" 2>/dev/null || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

status=0
for suite in $suites; do
  case "$suite" in
    real-backend) config="playwright.deerflow-edge.real-backend.config.ts" ;;
    journeys) config="playwright.deerflow-edge.config.ts" ;;
    *) echo "ui-e2e: unknown suite $suite (real-backend, journeys)" >&2; exit 1 ;;
  esac
  say "suite $suite ($(elapsed) so far)"
  wait_for_free_ports
  (cd "$front" && exec setsid ./node_modules/.bin/playwright test --config "$config") &
  runner=$!
  wait "$runner" || status=1
  runner=""
done

# --- Summary over both suites' JSON reports
node - "$reports" "$status" <<'EOF'
const { readFileSync, existsSync } = require("node:fs");
const dir = process.argv[2];
let passed = 0, failed = 0, flaky = 0, skipped = 0;
for (const name of ["real-backend.json", "journeys.json"]) {
  const file = `${dir}/${name}`;
  if (!existsSync(file)) continue;
  const s = JSON.parse(readFileSync(file, "utf8")).stats ?? {};
  passed += s.expected ?? 0; failed += s.unexpected ?? 0; flaky += s.flaky ?? 0; skipped += s.skipped ?? 0;
}
// A suite that failed without a failed test (a server that never came up, a config error) still fails the run.
if (process.argv[3] !== "0" && failed === 0) failed = 1;
const extra = [flaky ? `${flaky} flaky (passed on retry)` : "", skipped ? `${skipped} skipped or fixme` : ""].filter(Boolean).join(", ");
console.log(`ui-e2e: ${passed + flaky} passed, ${failed} failed${extra ? ` (${extra})` : ""}`);
EOF
if [ -f "$reports/metrics.jsonl" ]; then cat "$reports/metrics.jsonl"; fi
# Every /api call the browser made in the journeys, by route: how many always answered below 400.
if [ -f "$reports/api-calls.jsonl" ]; then
  node - "$reports/api-calls.jsonl" <<'NODE'
const rows = require("node:fs").readFileSync(process.argv[2], "utf8").trim().split("\n").map((line) => JSON.parse(line));
const route = (path) => path.replace(/[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}/g, "{id}").replace(/\/artifacts\/.*/, "/artifacts/{path}").replace(/\/(agents|skills|facts)\/[^/]+$/, "/$1/{name}");
const byRoute = new Map();
for (const row of rows) {
  const key = `${row.method} ${route(row.path)}`;
  byRoute.set(key, [...(byRoute.get(key) ?? []), row.status]);
}
const failing = [...byRoute].filter(([, statuses]) => statuses.some((status) => status >= 400));
console.log(`ui-e2e: the browser made ${rows.length} /api calls on ${byRoute.size} routes; ${byRoute.size - failing.length} always answered below 400`);
for (const [key, statuses] of failing) console.log(`ui-e2e:   ${key}: ${[...new Set(statuses)].join(", ")}`);
NODE
fi
say "wall time $(elapsed); reports in $reports"
exit "$status"
