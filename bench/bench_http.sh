#!/usr/bin/env bash
# HTTP transport overhead (issue 2): 10,000 sequential GETs to a loopback
# HTTP/1.1 keep-alive server (bench/http_bench_server.c, C, answers at once)
# through lash.http.request (bench/http_bench.lua), outside a task and inside
# one, against the same requests through libcurl's easy interface in a small
# C loop (bench/http_baseline.c). Both sides hit the SAME server; best of a
# few tries each. Aim: lash / baseline <= 1.2.
. "$(dirname "$0")/lib.sh"
N=${LASH_BENCH_HTTP_REQUESTS:-10000}
TRIES=${LASH_BENCH_HTTP_TRIES:-5}
LASH_BIN=${LASH_BIN:-$B/bin/lash}
cc -O2 -o "$out/http_bench_server" bench/http_bench_server.c || exit 1
cc -O2 -o "$out/http_baseline" bench/http_baseline.c $(pkg-config --cflags --libs libcurl) || exit 1
need "$LASH_BIN"
start_server 100 "$out/http_bench_server" 600
url="http://127.0.0.1:$port/"

# Runs alternate between the sides, TRIES rounds, and each side keeps its
# best time, so a noisy neighbour hurts both sides alike.
lash_run() {
  "$LASH_BIN" eval "_G.arg = {'$url', '$N', '$1'}; dofile('bench/http_bench.lua')"
}
min() { awk -v a="$1" -v b="$2" 'BEGIN { print (b == "" || a < b) ? a : b }'; }
base= nosig= inplace= task=
for _ in $(seq "$TRIES"); do
  t=$("$out/http_baseline" "$url" "$N") || exit 1; base=$(min "$t" "$base")
  t=$("$out/http_baseline" "$url" "$N" nosignal) || exit 1; nosig=$(min "$t" "$nosig")
  t=$(lash_run inplace) || exit 1; inplace=$(min "$t" "$inplace")
  t=$(lash_run task) || exit 1; task=$(min "$t" "$task")
done

us() { awk -v t="$1" -v n="$N" 'BEGIN { printf "%.1f", t * 1e6 / n }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
row "http: $N sequential GETs, libcurl easy loop" "$(us "$base")" "us/request" "total ${base}s; HTTP/1.1 keep-alive to a loopback C server"
row "http: $N sequential GETs, libcurl easy loop + NOSIGNAL" "$(us "$nosig")" "us/request" "total ${nosig}s; the baseline (lash sets NOSIGNAL too)"
row "http: $N sequential GETs, lash outside a task" "$(us "$inplace")" "us/request" "total ${inplace}s"
row "http: $N sequential GETs, lash inside a task" "$(us "$task")" "us/request" "total ${task}s"
row "http: lash / baseline, outside a task" "$(ratio "$inplace" "$nosig")" "x" "aim <= 1.2 (vs default easy loop: $(ratio "$inplace" "$base"))"
row "http: lash / baseline, inside a task" "$(ratio "$task" "$nosig")" "x" "aim <= 1.2 (vs default easy loop: $(ratio "$task" "$base"))"
