#!/usr/bin/env bash
# bench/bench_durable.sh: what `lash run --durable` (lash.durable) costs
# per step: whole-process wall time of one run at K = 20 and 200 tool steps
# (bench/agent_server.c's scripted model; run_command "echo step N") in a
# jailed sandbox whose workspace holds 10,000 small files, plain against
# --durable (a snapshot of the workspace after every call, committed with
# its result), interleaved, medians of LASH_BENCH_DURABLE_RUNS (default 3);
# and the disk one snapshot of that workspace takes. Both kinds save their
# session (the ledger of tool calls is in both); the difference is the
# workspace snapshots.
. "$(dirname "$0")/lib.sh"
LASH_BIN=${LASH_BIN:-$B/bin/lash}
RUNS=${LASH_BENCH_DURABLE_RUNS:-3}
KS=${LASH_BENCH_DURABLE_K:-"20 200"}
FILES=${LASH_BENCH_DURABLE_FILES:-10000}
need "$LASH_BIN"
cc -O2 -o "$out/agent_server" bench/agent_server.c || exit 1
mkdir -p "$tmp/state"
export LASH_SANDBOX_ROOT=$tmp/state OPENAI_API_KEY=bench LASH_SESSIONS_DB=$tmp/sessions.db
probe=$("$LASH_BIN" eval 'local ok = lash.sandbox.probe(); return ok and "yes" or "no"' 2>/dev/null)
if [ "$probe" != yes ]; then
  row "durable: --durable vs plain" "skipped" "" "no local jail here (lash sandbox probe)"
  exit 0
fi
# the prepared workspace: FILES files of 100 bytes in 100 directories
sb=$("$LASH_BIN" sandbox create --timeout 600 2>/dev/null | tail -1)
"$LASH_BIN" sandbox exec "$sb" --timeout 300 -- sh -c "i=0; while [ \$i -lt $FILES ]; do d=d\$((i % 100)); \
  mkdir -p \$d; head -c 100 /dev/zero > \$d/f\$i; i=\$((i + 1)); done" >/dev/null || exit 1
base=$("$LASH_BIN" sandbox snapshot "$sb") || exit 1
"$LASH_BIN" sandbox destroy "$sb" >/dev/null 2>&1
export LASH_BENCH_FROM_SNAPSHOT=$base
snaps_bytes() { du -s --block-size=1 "$tmp/state/snapshots" | cut -f1; }   # allocated, not apparent
base_bytes=$(snaps_bytes)

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ms() { awk -v u="$1" 'BEGIN { printf "%.1f", u / 1000 }'; }
timed() {  # KIND -> wall time of one run, in microseconds
  local s e flag=
  [ "$1" = durable ] && flag=--durable
  s=$(date +%s%N)
  OPENAI_BASE_URL=http://127.0.0.1:$port/v1 "$LASH_BIN" run --trust bench/steps_durable.lua go --no-stream \
    --max-steps 100000 $flag >"$tmp/out" 2>"$tmp/err" \
    || { echo "bench_durable: $1 failed:" >&2; tail -5 "$tmp/err" >&2; return 1; }
  e=$(date +%s%N)
  echo $(( (e - s) / 1000 ))
}
for k in $KS; do
  start_server 50 "$out/agent_server" "$k" 1800 run_command
  : >"$tmp/t.plain"; : >"$tmp/t.durable"
  for _ in $(seq "$RUNS"); do
    timed plain >>"$tmp/t.plain" || exit 1
    timed durable >>"$tmp/t.durable" || exit 1
  done
  kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null; srv=
  p=$(median <"$tmp/t.plain"); d=$(median <"$tmp/t.durable")
  row "durable K=$k, $FILES-file workspace: plain run (saved)" "$(ms "$p")" "ms" "median of $RUNS"
  row "durable K=$k, $FILES-file workspace: --durable" "$(ms "$d")" "ms" \
    "$(awk -v d="$d" -v p="$p" -v k="$k" 'BEGIN { printf "%.2fx plain, %+.1f ms/step", d / p, (d - p) / k / 1000 }')"
done
n=$(ls "$tmp/state/snapshots" | grep -c '^ls-')
row "durable: disk per snapshot, $FILES-file workspace" \
  "$(awk -v b="$(snaps_bytes)" -v a="$base_bytes" -v n="$n" 'BEGIN { printf "%.1f", (b - a) / (n - 1) / 1048576 }')" "MiB" \
  "allocated (du) by $((n - 1)) snapshots kept by the durable runs (full copies: one per step until the session is removed or rewound)"
