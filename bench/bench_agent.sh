#!/usr/bin/env bash
# Agent step overhead (issue 4). A loopback OpenAI-compatible server
# (bench/agent_server.c) answers instantly with a call to the `echo` tool
# for K steps, then with "done". lash runs the agent (bench/agent_bench.lua;
# the tool runs `echo hi` through a local sandbox, isolation "none"); a bare
# C loop (bench/agent_baseline.c) does the same HTTP round trips and process
# spawns with libcurl and posix_spawn. Harness overhead per step =
# (lash's wall time - the C loop's) / steps, for 1, 100 and 1,000
# concurrent runs in one process and one thread. The "no process" rows
# repeat both sides with a tool that answers in-process, which isolates the
# agent core from the cost of spawning. Best of a few tries for small runs.
. "$(dirname "$0")/lib.sh"
K=${LASH_BENCH_AGENT_STEPS:-10}
LASH_BIN=${LASH_BIN:-$B/bin/lash}
cc -O2 -o "$out/agent_server" bench/agent_server.c || exit 1
cc -O2 -o "$out/agent_baseline" bench/agent_baseline.c $(pkg-config --cflags --libs libcurl) || exit 1
need "$LASH_BIN"
start_server 50 "$out/agent_server" "$K" 1800

# lash_run N MODE -> "wall rss_before peak_rss"
lash_run() {
  "$LASH_BIN" eval "_G.arg = {'$port', '$1', '$K', '$2', '$tmp/state'}; dofile('bench/agent_bench.lua')" \
    2>"$tmp/err" || { cat "$tmp/err" >&2; return 1; }
}
# best N MODE TRIES: the run with the smallest wall time
best_lash() {
  local best="" line
  for _ in $(seq "$3"); do
    line=$(lash_run "$1" "$2") || return 1
    if [ -z "$best" ] || awk -v a="${line%% *}" -v b="${best%% *}" 'BEGIN { exit !(a < b) }'; then best=$line; fi
  done
  echo "$best"
}
best_base() {
  local best="" t
  for _ in $(seq "$3"); do
    t=$("$out/agent_baseline" "$port" "$1" "$K" "$2") || return 1
    if [ -z "$best" ] || awk -v a="$t" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$t; fi
  done
  echo "$best"
}


for n in 1 100 1000; do
  tries=5; [ "$n" -ge 100 ] && tries=2; [ "$n" -ge 1000 ] && tries=1
  le=$(best_lash "$n" echo "$tries") || exit 1
  be=$(best_base "$n" spawn "$tries") || exit 1
  ll=$(best_lash "$n" lua "$tries") || exit 1
  bl=$(best_base "$n" nospawn "$tries") || exit 1
  read -r lwall lrss lpeak lanon <<<"$le"
  read -r llwall _ llpeak <<<"$ll"
  steps=$((n * K))
  label="$n run"; [ "$n" -gt 1 ] && label="$(printf "%'d" "$n") concurrent runs"
  row "agent: overhead per step, $label (echo tool)" \
      "$(awk -v l="$lwall" -v b="$be" -v s="$steps" 'BEGIN { printf "%.3f", (l - b) / s * 1000 }')" "ms/step" \
      "K=$K; lash $(awk -v l="$lwall" 'BEGIN { printf "%.1f", l * 1000 }') ms vs bare C loop $(awk -v b="$be" 'BEGIN { printf "%.1f", b * 1000 }') ms; aim < 0.5"
  row "agent: overhead per step, $label (no process)" \
      "$(awk -v l="$llwall" -v b="$bl" -v s="$steps" 'BEGIN { printf "%.3f", (l - b) / s * 1000 }')" "ms/step" \
      "lash $(awk -v l="$llwall" 'BEGIN { printf "%.1f", l * 1000 }') ms vs C $(awk -v b="$bl" 'BEGIN { printf "%.1f", b * 1000 }') ms; $(awk -v l="$llwall" -v s="$steps" 'BEGIN { printf "%.0f", s / l }') steps/s"
  if [ "$n" -eq 1 ]; then
    row "agent: resident memory, 1 run" "$lpeak" "MiB" \
        "process peak incl. shared libraries (libcurl, TLS); private $lanon MiB; the run added $(awk -v p="$lpeak" -v r="$lrss" 'BEGIN { printf "%.2f", p - r }') MiB; aim < 10"
  else
    row "agent: resident memory per run, $label" \
        "$(awk -v p="$llpeak" -v r="$lrss" -v n="$n" 'BEGIN { printf "%.0f", (p - r) * 1024 / n }')" "KiB/run" \
        "peak minus the process before the runs, no-process tool"
  fi
done
