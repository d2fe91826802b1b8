#!/usr/bin/env bash
# bench/run.sh: `make bench`. Runs every bench/bench_*.sh and prints one
# markdown table; each script prints its own rows `| name | value | unit | note |`.
# Ratios are only meaningful between rows of the same run.
set -u
cd "$(dirname "$0")/.."
export LASH_BUILD=${LASH_BUILD:-build}
# the benchmarks' runs are saved (sessions), but never into the user's own
# state: a throwaway XDG_STATE_HOME for the whole table
bench_state=$(mktemp -d /tmp/lash-bench-state.XXXXXX)
trap 'rm -rf "$bench_state"' EXIT
export XDG_STATE_HOME=$bench_state
only=${1:-}
echo "lash benchmarks, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(uname -r)"
echo
echo "| benchmark | value | unit | note |"
echo "|---|---|---|---|"
status=0
for b in bench/bench_*.sh; do
  [ -f "$b" ] || continue
  if [ -n "$only" ] && [[ "$b" != *"$only"* ]]; then continue; fi
  if ! bash "$b"; then
    echo "| $(basename "$b") | FAILED | | see stderr |"
    status=1
  fi
done
exit $status
