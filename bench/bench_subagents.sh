#!/usr/bin/env bash
# Sub-agents (issue 30): 1,000 concurrent sub-agents of one parent in one
# thread against 1,000 concurrent top-level runs of the same agent
# (bench/subagents_bench.lua: in-process model and tool, so the harness is
# what is measured). Memory: the Lua heap per live run, sampled when all
# 1,000 wait at once. Time: per step, best of 3 runs of each.
. "$(dirname "$0")/lib.sh"
N=${LASH_BENCH_SUBAGENTS:-1000}
K=10
need "$B/bin/lash"
best() {   # best MODE: the line of the fastest of 3 runs
  local b="" line
  for _ in 1 2 3; do
    line=$("$B/bin/lash" eval "_G.arg = {$N, $K}; dofile('bench/subagents_bench.lua')" | grep "^$1 ") || return 1
    if [ -z "$b" ] || awk -v a="$(echo "$line" | cut -d' ' -f2)" -v c="$(echo "$b" | cut -d' ' -f2)" 'BEGIN { exit !(a < c) }'; then b=$line; fi
  done
  echo "$b"
}
read -r _ twall tkib <<<"$(best top)" || exit 1
read -r _ swall skib <<<"$(best sub)" || exit 1
read -r _ _ ckib <<<"$(best call)" || exit 1
steps=$((N * K))
row "sub-agents: live memory per child, $N concurrent in one thread" "$skib" "KiB/child" \
    "top-level run $tkib KiB ($(awk -v s="$skib" -v t="$tkib" 'BEGIN { printf "%.2f", s / t }')x); of the child's, $ckib KiB is the parent's tool call (any call costs it); aim: the run itself no more than a top-level one"
row "sub-agents: time per step, $N children x $K steps" \
    "$(awk -v w="$swall" -v s="$steps" 'BEGIN { printf "%.1f", w / s * 1e6 }')" "µs/step" \
    "$N top-level runs: $(awk -v w="$twall" -v s="$steps" 'BEGIN { printf "%.1f", w / s * 1e6 }') µs/step ($(awk -v a="$swall" -v b="$twall" 'BEGIN { printf "%.2f", a / b }')x)"
