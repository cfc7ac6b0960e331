#!/usr/bin/env bash
# `npm run bench`: benchmarks (never timed tests). Prints tables and writes bench/results/latest.md.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_node_modules
cd "$ROOT"
exec tsx bench/index.ts "$@"
