#!/usr/bin/env bash
# bench/bench_scale.sh: scale in one process and one thread (issue 35, aim
# 3), each at several sizes so where it stops scaling shows:
#   runs        N concurrent runs of an agent whose model is a Lua function
#               and whose tool is in-process (bench/scale_runs.lua): memory
#               per idle run (Lua heap and resident set), steps/s;
#               N = 100, 1,000, 10,000 (LASH_BENCH_SCALE_RUNS)
#   sandboxes   N local sandboxes, each its own bubblewrap jail, each in a
#               loop of `true` for LASH_BENCH_SCALE_SECS seconds, all at
#               once (bench/scale_sandboxes.lua): commands/s, the lash
#               process's RSS and its jails'; N = 1, 10, 100
#               (LASH_BENCH_SCALE_BOXES)
# 1,000 concurrent sub-agents: bench_subagents.sh.
. "$(dirname "$0")/lib.sh"
LASH_BIN=${LASH_BIN:-$B/bin/lash}
need "$LASH_BIN"
K=10
for n in ${LASH_BENCH_SCALE_RUNS:-100 1000 10000}; do
  read -r wall steps heap rss rss0 peak < <("$LASH_BIN" eval "_G.arg = {$n, $K}; dofile('bench/scale_runs.lua')" 2>"$tmp/err") \
    || { cat "$tmp/err" >&2; exit 1; }
  [ -n "${peak:-}" ] || { cat "$tmp/err" >&2; exit 1; }
  row "scale: $(printf "%'d" "$n") concurrent runs, function model, $K tool steps each" \
      "$(awk -v s="$steps" -v w="$wall" 'BEGIN { printf "%.0f", s / w }')" "steps/s" \
      "idle run: $heap KiB of Lua heap, $rss KiB resident; process $(awk -v a="$rss0" 'BEGIN { printf "%.1f", a / 1024 }') MiB before the runs, peak $(awk -v a="$peak" 'BEGIN { printf "%.1f", a / 1024 }') MiB"
done

probe=$("$LASH_BIN" eval 'local ok = lash.sandbox.probe(); return ok and "yes" or "no"' 2>/dev/null)
if [ "$probe" != yes ]; then
  row "scale: concurrent jailed sandboxes" "skipped" "" "no bubblewrap jail here"
  exit 0
fi
secs=${LASH_BENCH_SCALE_SECS:-6}
mkdir -p "$tmp/state"
for n in ${LASH_BENCH_SCALE_BOXES:-1 10 100}; do
  read -r cs done wall lrss jrss procs < <("$LASH_BIN" eval "_G.arg = {$n, $secs, '$tmp/state'}; dofile('bench/scale_sandboxes.lua')" 2>"$tmp/err") \
    || { cat "$tmp/err" >&2; exit 1; }
  [ -n "${procs:-}" ] || { cat "$tmp/err" >&2; exit 1; }
  row "scale: $n concurrent jailed sandboxes, each looping exec true" \
      "$(awk -v d="$done" -v w="$wall" 'BEGIN { printf "%.0f", d / w }')" "commands/s" \
      "$done in $(printf %.1f "$wall") s; made in $cs s (jail built at the first command); lash RSS $(awk -v a="$lrss" 'BEGIN { printf "%.1f", a / 1024 }') MiB, its $procs jail processes $(awk -v a="$jrss" 'BEGIN { printf "%.1f", a / 1024 }') MiB (shared pages counted in each)"
done
