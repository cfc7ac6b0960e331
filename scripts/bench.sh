#!/usr/bin/env bash
# `npm run bench`: benchmarks (never timed tests). Prints tables and writes bench/results/latest.md.
# `npm run bench:loop` (`bench.sh loop`): the durable loop against an in-process loop; needs
# DATABASE_URL, starts its own Temporal dev server (installs the CLI under .tools when missing).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_node_modules
cd "$ROOT"
if [[ "${1:-}" == "loop" ]]; then
  shift
  ensure_temporal_cli
  exec tsx bench/loop/index.ts "$@"
fi
exec tsx bench/index.ts "$@"
