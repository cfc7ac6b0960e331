#!/usr/bin/env bash
# The run command (`npm start`): installs what it needs, starts the Temporal dev server with its Web UI
# (state kept under .data/), then runs the worker and a demo task (scripts/demo.ts).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_node_modules
mkdir -p "$DATA_DIR"
if [[ -z "${TEMPORAL_ADDRESS:-}" ]]; then
  start_temporal_dev 7233 8233 "$DATA_DIR/temporal.db" "$DATA_DIR/temporal.log"
  export TEMPORAL_ADDRESS="127.0.0.1:7233"
fi
cd "$ROOT"
exec tsx scripts/demo.ts
