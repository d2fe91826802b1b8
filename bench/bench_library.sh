#!/usr/bin/env bash
# The self-contained library (issue 13): its size, the cost of a cold
# lash_open in a fresh process (bench/library_bench.c, a C host linking
# liblash.so), and the resident memory of the first state and of each
# further one. Medians of R fresh processes.
. "$(dirname "$0")/lib.sh"
R=${LASH_BENCH_LIBRARY_ROUNDS:-15}
N=${LASH_BENCH_LIBRARY_STATES:-100}
need "$B/liblash.so"
absb=$(cd "$B" && pwd)
cc -O2 $LASH_INC -o "$out/library_bench" bench/library_bench.c -L"$absb" -llash -Wl,-rpath,"$absb" || exit 1
kib() { echo $(( ($(stat -c %s "$1") + 512) / 1024 )); }

so=$(readlink -f "$B/liblash.so")
strip -o "$out/liblash.stripped.so" "$so"
row "library: liblash.so size" "$(kib "$out/liblash.stripped.so")" "KiB" \
    "stripped; $(kib "$so") KiB with debug info; Lua 5.4, libyaml and lash's Lua modules inside ($(grep -c '^  { "' "$B/gen/lua_modules.c") modules as bytecode)"
row "library: liblash.a size" "$(kib "$B/liblash.a")" "KiB" "one relocatable object, with debug info"

for _ in $(seq "$R"); do "$out/library_bench" "$N" >> "$tmp/runs" || exit 1; done
med() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
col() { awk -v c="$1" '{ print $c }' "$tmp/runs" | med; }
row "library: first lash_open in a process (cold)" "$(col 1)" "ms" "median of $R processes; the state loads require 'lash'"
row "library: a further lash_open" "$(col 2)" "ms" "same process"
row "library: resident memory the first state adds" "$(( $(col 4) ))" "KiB" "process before it: $(col 3) KiB (libc, libcurl and its TLS stack, liblash mapped)"
row "library: resident memory per further state" "$(col 5)" "KiB" "$N states open at once; Lua heap of one state $(col 6) KiB"
