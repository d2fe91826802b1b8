#!/usr/bin/env bash
# Embedding (issue 8): a C host on lash.h (bench/embed_bench.c) against the
# instant loopback Chat Completions server of bench_agent.sh
# (bench/agent_server.c: K calls to `echo`, then "done"); `echo` is a host
# tool registered from C and answered in its callback.
# - Frame budget: 100 runs always in flight (each finished run replaced at
#   once); a 500 Hz frame loop calls lash_step(S, 1) once per frame; the
#   distribution of wall time inside lash_step. Aim: p99 < 2 ms.
# - Concurrency: 1, 100 and 1,000 runs started together in one thread,
#   stepped with lash_step(S, -1): agent steps (model round trip + tool
#   call) per second; and, in a fresh process, the resident memory each run
#   adds while it sits idle waiting for a host tool call. Aim: < 200 KiB.
. "$(dirname "$0")/lib.sh"
K=${LASH_BENCH_EMBED_STEPS:-10}
SECS=${LASH_BENCH_EMBED_SECONDS:-5}
need "$B/liblash.a"
cc -O2 -o "$out/agent_server" bench/agent_server.c || exit 1
# the host links the self-contained liblash.a (Lua inside) and nothing of Lua
cc -O2 $LASH_INC -o "$out/embed_bench" bench/embed_bench.c "$B/liblash.a" \
  $(pkg-config --libs libcurl sqlite3) -lm -ldl || exit 1
start_server 50 "$out/agent_server" "$K" 900

read -r n p50 p99 max sps cp50 cp99 cmax < <("$out/embed_bench" frame "$port" 100 "$K" "$SECS" 500) || exit 1
note="100 runs, 500 Hz frames, $n steps; thread CPU p50/p99/max $cp50/$cp99/$cmax ms; $sps agent steps/s"
row "embed: time in lash_step(S, 1 ms), p50" "$p50" "ms" "$note"
row "embed: time in lash_step(S, 1 ms), p99" "$p99" "ms" "aim < 2"
row "embed: time in lash_step(S, 1 ms), max" "$max" "ms" "one resume or GC step is never cut short"

for nr in 1 100 1000; do
  label="$nr run"; [ "$nr" -gt 1 ] && label="$(printf "%'d" "$nr") concurrent runs"
  rounds=1; [ "$nr" -eq 1 ] && rounds=100; [ "$nr" -eq 100 ] && rounds=5
  read -r wall sps lps < <("$out/embed_bench" conc "$port" "$nr" "$K" "$rounds") || exit 1
  row "embed: agent steps per second, $label" "$sps" "steps/s" \
      "K=$K, $rounds round(s): $(awk -v w="$wall" 'BEGIN { printf "%.1f", w * 1000 }') ms wall; $lps lash_step calls/s; one thread"
  read -r rss lua < <("$out/embed_bench" idle "$port" "$nr" "$K") || exit 1
  row "embed: resident memory per idle run, $label" "$rss" "KiB/run" \
      "waiting on a host tool; Lua heap $lua KiB/run; aim < 200$([ "$nr" -eq 1 ] && echo "; one run is below page granularity")"
done
