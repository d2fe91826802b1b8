#!/usr/bin/env bash
# bench/bench_search.sh: the sandbox's glob and grep tools (issue 31) on a
# tree of 100,000 files in a local sandbox (.gitignore honoured, sorted
# output), against `grep -rn ... | sort`, `find -name ... | sort` and
# `rg -n --sort path` run in the same sandbox over the same tree; medians of
# 5 interleaved runs. Prints rows `| name | value | unit | note |`.
. "$(dirname "$0")/lib.sh"
LASH_BIN=${LASH_BIN:-$B/bin/lash}
N=${LASH_BENCH_SEARCH_FILES:-100000}
[ -x "$LASH_BIN" ] || { echo "bench_search: $LASH_BIN is missing (run make)" >&2; exit 1; }
probe=$("$LASH_BIN" eval 'local ok, why = lash.sandbox.probe(); return ok and "yes" or "no " .. tostring(why)' 2>/dev/null)
if [ "${probe%% *}" != "yes" ]; then
  row "search: grep over $N files" "skipped" "" "no bubblewrap jail here: ${probe#no }"
  exit 0
fi
"$LASH_BIN" eval "_G.arg = {'$tmp/state', $N}; dofile('bench/search_bench.lua')" >"$tmp/out" 2>"$tmp/err" \
  || { cat "$tmp/err" >&2; exit 1; }
get() { awk -v k="$1" '$1 == k { print $2 }' "$tmp/out"; }
g=$(get grep); rn=$(get grep_rn); gl=$(get glob); fn=$(get find_name); rg=$(get rg)
row "search: grep tool, $N files" "$g" "ms" "grep -rn | sort in the same sandbox: $rn ms ($(awk -v a="$g" -v b="$rn" 'BEGIN { printf "%.2f", a / b }')x)"
if [ -n "$rg" ]; then
  row "search: rg -n --sort path, $N files" "$rg" "ms" "lash's grep tool is $(awk -v a="$g" -v b="$rg" 'BEGIN { printf "%.2f", a / b }')x rg"
else
  row "search: rg, $N files" "skipped" "" "no rg in the sandbox (apt install ripgrep)"
fi
row "search: glob tool '**/*.c', $N files" "$gl" "ms" "find -name | sort in the same sandbox: $fn ms ($(awk -v a="$gl" -v b="$fn" 'BEGIN { printf "%.2f", a / b }')x)"
