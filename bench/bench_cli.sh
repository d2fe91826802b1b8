#!/usr/bin/env bash
# bench/bench_cli.sh: the CLI as a process, the path an orchestrator uses
# (issue 35, aim 2): `lash sandbox exec ID -- true` from a parent that
# spawns it, against a bare `sh -c true` and against a bare bwrap of the
# same jail (bench/sandbox_bare.c: lash's own command line for that
# sandbox, no supervisor, no lash). Also the process start alone
# (`lash eval 'return 1'`). Wall time: medians of LASH_BENCH_CLI_RUNS (default 40),
# the commands interleaved (bench/spawn_time.c) in four rounds with the
# bare bwrap between them. Instructions (callgrind, the lash process only,
# not the jail's): repeatable where wall time is the scheduler's.
. "$(dirname "$0")/lib.sh"
LASH_BIN=${LASH_BIN:-$B/bin/lash}
N=${LASH_BENCH_CLI_RUNS:-40}
need "$LASH_BIN"
cc -O2 -Wall -o "$out/spawn_time" bench/spawn_time.c || exit 1
export LASH_SANDBOX_ROOT=$tmp/state
q=$(( (N + 3) / 4 ))
probe=$("$LASH_BIN" eval 'local ok = lash.sandbox.probe(); return ok and "yes" or "no"' 2>/dev/null)
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { printf "%.2f", (a[int((NR + 1) / 2)] + a[int(NR / 2) + 1]) / 2 }'; }
sh_m=(); st_m=(); ex_m=(); bw_m=()
id=
if [ "$probe" = yes ]; then
  cc -O2 -Wall $LASH_INC $(pkg-config --cflags lua5.4) bench/sandbox_bare.c "$B/liblash_internal.a" \
     -o "$out/sandbox_bare" || exit 1
  id=$("$LASH_BIN" sandbox create --timeout 900 2>"$tmp/err") || { cat "$tmp/err" >&2; exit 1; }
  # its first command makes the disk quota: not what is measured here
  "$LASH_BIN" sandbox exec "$id" -- true || exit 1
fi
for _ in 1 2 3 4; do
  if [ -n "$id" ]; then
    "$out/spawn_time" "$q" sh -c true :: "$LASH_BIN" eval 'return 1' :: "$LASH_BIN" sandbox exec "$id" -- true >"$tmp/t" || exit 1
    { read -r a _; read -r b _; read -r c _; } <"$tmp/t"
    ex_m+=("$c")
    read -r d _ < <("$out/sandbox_bare" "$q" "$tmp/state" "$id" /workspace "$(command -v bwrap)" true) || exit 1
    bw_m+=("$d")
  else
    "$out/spawn_time" "$q" sh -c true :: "$LASH_BIN" eval 'return 1' >"$tmp/t" || exit 1
    { read -r a _; read -r b _; } <"$tmp/t"
  fi
  sh_m+=("$a"); st_m+=("$b")
done
shm=$(median "${sh_m[@]}"); stm=$(median "${st_m[@]}")
row "cli: sh -c true (median)" "$shm" "ms" "4 rounds of $q, median of the round medians; the floor of aim 2"
row "cli: lash eval 'return 1', the process start (median)" "$stm" "ms" "$(awk -v a="$stm" -v b="$shm" 'BEGIN { printf "%+.2f ms over sh -c", a - b }')"
if [ -n "$id" ]; then
  exm=$(median "${ex_m[@]}"); bwm=$(median "${bw_m[@]}")
  row "cli: lash sandbox exec ID -- true (median)" "$exm" "ms" "$(awk -v a="$exm" -v b="$shm" 'BEGIN { printf "%+.2f ms over sh -c (%.1fx)", a - b, a / b }'); aim <= +5 ms"
  row "cli: bare bwrap of the same jail, true (median)" "$bwm" "ms" "$(awk -v a="$bwm" -v b="$shm" 'BEGIN { printf "%+.2f ms over sh -c", a - b }'); lash sandbox exec is $(awk -v a="$exm" -v b="$bwm" 'BEGIN { printf "%.2fx", a / b }') it"
else
  row "cli: lash sandbox exec" "skipped" "" "no bubblewrap jail here"
fi
if command -v valgrind >/dev/null; then
  ins() { valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" "$@" >/dev/null 2>"$tmp/cg.err" || return 1
          sed -n 's/.*Collected : *//p' "$tmp/cg.err" | awk '{ printf "%.2f", $1 / 1e6 }'; }
  ish=$(ins sh -c true) || exit 1
  iev=$(ins "$LASH_BIN" eval 'return 1') || exit 1
  note="sh -c true $ish M; lash eval $iev M"
  if [ -n "$id" ]; then iex=$(ins "$LASH_BIN" sandbox exec "$id" -- true) || exit 1; note="$note; lash sandbox exec $iex M (the lash process only)"; fi
  row "cli: instructions of a start (callgrind)" "$iev" "M" "$note"
fi
rel=$(LD_DEBUG=statistics "$LASH_BIN" eval 'return 1' 2>&1 >/dev/null | sed -n 's/.*final number of relocations: *//p' | tail -1)
libs=$(LD_TRACE_LOADED_OBJECTS=1 "$LASH_BIN" | grep -c '=>')
row "cli: shared libraries at start / symbol relocations" "$libs / $rel" "" "LD_DEBUG=statistics, lash eval"
[ -n "$id" ] && "$LASH_BIN" sandbox destroy "$id" >/dev/null
exit 0
