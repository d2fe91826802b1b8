#!/bin/sh
# examples/pipeline/run.sh: a cross-step pipeline in plain shell, the way an
# orchestrator (Airflow, cron, CI) runs it, one process per step:
#
#   provision: lash sandbox create --owner O      (prints the handle H)
#   stage:     lash sandbox write H PATH < input
#   analyse:   lash run analyse.lua "..." --attach H --owner O
#   review:    lash run analyse.lua "..." --attach H --owner O
#   (a step presenting another owner is refused)
#   collect:   lash sandbox read H /workspace/report.md
#   destroy:   lash sandbox destroy H
#
# Usage: examples/pipeline/run.sh [OUT_DIR]   (the report lands in OUT_DIR,
# default the current directory). LASH names the lash binary (default:
# lash on PATH); BACKEND the sandbox backend (local, the default, or modal);
# LASH_SANDBOX_ROOT where local sandboxes live.
set -eu
LASH=${LASH:-lash}
BACKEND=${BACKEND:-local}
B="--backend $BACKEND"
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-.}
# One owner per pipeline run: Airflow would use <dag_id>/<run_id>.
OWNER=${OWNER:-pipeline/$(date +%Y%m%dT%H%M%S)-$$}

echo "== provision (owner $OWNER)"
H=$($LASH sandbox create $B --owner "$OWNER" --timeout 1800 --workdir /workspace)
echo "sandbox $H"
# Whatever happens below, the sandbox is destroyed at the end (its
# lifetime, 1800 s, would end it anyway).
trap '$LASH sandbox destroy $B "$H" >/dev/null 2>&1 || true' EXIT

echo "== stage the input"
$LASH sandbox write $B "$H" /workspace/input/orders.csv < "$HERE/orders.csv"

echo "== analyse"
$LASH run "$HERE/analyse.lua" "Analyse the orders into the report." $B --attach "$H" --owner "$OWNER" --no-stream

echo "== review"
$LASH run "$HERE/analyse.lua" "Review the report and sign it off." $B --attach "$H" --owner "$OWNER" --no-stream

echo "== a step that presents another owner"
if $LASH run "$HERE/analyse.lua" "Analyse the orders into the report." $B --attach "$H" --owner someone-else \
  --no-stream; then
  echo "error: a run with the wrong owner was let in" >&2
  exit 1
fi
echo "(refused, as it should be)"

echo "== collect"
$LASH sandbox read $B "$H" /workspace/report.md > "$OUT/report.md"
cat "$OUT/report.md"

echo "== destroy"
$LASH sandbox destroy $B "$H"
trap - EXIT
echo "done: $OUT/report.md"
