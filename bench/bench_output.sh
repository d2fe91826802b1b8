#!/usr/bin/env bash
# bench/bench_output.sh: output shaping (issue 2, section 5). Tail ring +
# UTF-8 repair + truncation over 1 GiB of command-like output fed in 64 KiB
# chunks with a 50 KiB cap (target: >= 2 GB/s), the same in 4 KiB chunks
# (a pipe's usual read size), peak resident memory at 256 MiB and 1 GiB of
# input (target: not growing with the input), the per-stream cost of
# repair + truncation, and UTF-8 validation speed. Prints markdown rows
# `| name | value | unit | note |`. GB is 10^9 bytes.
set -eu
cd "$(dirname "$0")/.."
BUILD=${LASH_BUILD:-build}
[ -f "$BUILD/liblash_internal.a" ] || make -s "$BUILD/liblash_internal.a" >&2
mkdir -p "$BUILD/bench"
bin=$BUILD/bench/output_bench
cc -O2 -Wall -Wextra -Isrc/1-base -Isrc/2-runtime -Isrc/3-transport -Isrc/4-sandbox -Isrc/5-backend/local/prim -Isrc/5-backend/local -Isrc/5-backend/modal -Isrc/6-lua -Isrc/7-embed -Isrc/8-cli bench/output_bench.c "$BUILD/liblash_internal.a" -o "$bin"

# best SECONDS of three runs of: $bin ARGS...; sets secs, bytes, rss, hwm
best() {
  local i s b r h o
  secs=
  for i in 1 2 3; do
    read -r s b r h o < <("$bin" "$@")
    if [ -z "$secs" ] || awk -v a="$s" -v b="$secs" 'BEGIN { exit !(a < b) }'; then
      secs=$s; bytes=$b; rss=$r; hwm=$h
    fi
  done
}

gbps() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.1f", b / s / 1e9 }'; }

best shape 1024 64 51200
echo "| output: ring + repair + truncate, 1 GiB in 64 KiB chunks, 50 KiB cap | $(gbps "$bytes" "$secs") | GB/s | target >= 2 GB/s; each chunk hot in cache as after a read(); best of 3, $secs s |"
best shape 1024 4 51200
echo "| output: ring + repair + truncate, 1 GiB in 4 KiB chunks, 50 KiB cap | $(gbps "$bytes" "$secs") | GB/s | best of 3, $secs s |"
read -r _ _ _ hwm256 _ < <("$bin" shape 256 64 51200)
read -r _ _ _ hwm1g _ < <("$bin" shape 1024 64 51200)
echo "| output: peak RSS after 256 MiB of input | $hwm256 | KiB | VmHWM of the whole bench process |"
echo "| output: peak RSS after 1 GiB of input | $hwm1g | KiB | VmHWM; should equal the 256 MiB row (ring is 50 KiB) |"
best trunc 20000 51200
echo "| output: repair + truncate + render of a 50 KiB tail | $(awk -v s="$secs" 'BEGIN { printf "%.1f", s / 20000 * 1e6 }') | us/call | once per stream, after the ring |"
best utf8 1024
echo "| output: UTF-8 validation | $(gbps "$bytes" "$secs") | GB/s | 1 GiB of mixed text, 1 MiB at a time |"
