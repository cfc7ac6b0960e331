#!/usr/bin/env bash
# The test command (`npm test`): installs what it needs, starts a real Temporal dev server on its own
# port, then type-checks and runs the whole suite. PostgreSQL: DATABASE_URL if set (CI provisions a
# real server), else the embedded PostgreSQL. Extra arguments go to Jest.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_node_modules
# The raw-start, schedule and restart tests drive the `temporal` CLI even when TEMPORAL_ADDRESS is given.
ensure_temporal_cli
mkdir -p "$DATA_DIR"
TEST_TEMPORAL_PORT="${TEST_TEMPORAL_PORT:-7244}"
if [[ -z "${TEMPORAL_ADDRESS:-}" ]]; then
  start_temporal_dev "$TEST_TEMPORAL_PORT" "$((TEST_TEMPORAL_PORT + 1000))" \
    "$DATA_DIR/test-temporal.db" "$DATA_DIR/test-temporal.log" fresh
  export TEMPORAL_ADDRESS="127.0.0.1:$TEST_TEMPORAL_PORT"
  # Stop the server at exit only if this run started it.
  if [[ -n "$TEMPORAL_STARTED_PID" ]]; then trap 'stop_temporal_dev "$TEMPORAL_STARTED_PID"' EXIT; fi
fi
log "Temporal: $TEMPORAL_ADDRESS; database: ${DATABASE_URL:-embedded PostgreSQL}"
cd "$ROOT"
log "type-checking"
tsc --noEmit -p tsconfig.json
log "linting"
eslint --max-warnings=0 .
log "checking the formatting (npm run format fixes it)"
prettier --check --log-level warn .
status=0
jest --runInBand --json --outputFile="$DATA_DIR/jest-results.json" "$@" || status=$?
# One plain closing line for CI logs: "N passed, N failed, N skipped".
node -e 'const r = require(process.argv[1]); console.log(`${r.numPassedTests} passed, ${r.numFailedTests} failed, ${r.numPendingTests} skipped`)' \
  "$DATA_DIR/jest-results.json" 2>/dev/null || true
exit "$status"
