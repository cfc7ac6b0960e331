#!/usr/bin/env bash
# The run command (`npm start`): installs what it needs, starts the Temporal dev server with its Web UI
# (state kept under .data/), then runs the worker and a demo task (scripts/demo.ts).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_node_modules
mkdir -p "$DATA_DIR"
# The dev server's ports (defaults 7233 and its Web UI 8233). It outlives this command, so the workflows'
# history stays browsable; the demo says so when it stops, with the command that stops the server.
TEMPORAL_DEV_PORT="${TEMPORAL_DEV_PORT:-7233}"
TEMPORAL_DEV_UI_PORT="${TEMPORAL_DEV_UI_PORT:-8233}"
if [[ -z "${TEMPORAL_ADDRESS:-}" ]]; then
  start_temporal_dev "$TEMPORAL_DEV_PORT" "$TEMPORAL_DEV_UI_PORT" "$DATA_DIR/temporal.db" "$DATA_DIR/temporal.log"
  export TEMPORAL_ADDRESS="127.0.0.1:$TEMPORAL_DEV_PORT"
  export DEMO_TEMPORAL_PID="$TEMPORAL_DEV_PID"
  export DEMO_TEMPORAL_UI="http://localhost:$TEMPORAL_DEV_UI_PORT"
  export TEMPORAL_UI_URL="${TEMPORAL_UI_URL:-$DEMO_TEMPORAL_UI}"
fi
cd "$ROOT"
# Node itself with tsx's loader, not the tsx command: that one relays a signal to its child and, when the
# child does not acknowledge it within 30 ms (a loaded machine), kills it with SIGKILL, so the stop
# never drains the worker or says what it left running.
exec node --import tsx scripts/demo.ts
