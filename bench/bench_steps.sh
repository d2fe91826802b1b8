#!/usr/bin/env bash
# bench/bench_steps.sh: the agent benchmark of issue 15, whole-process wall
# time of one run at K = 0, 20, 200, 1000 tool steps against a scripted
# OpenAI-compatible model on loopback (bench/agent_server.c answering
# run_command {"command": "echo step N"} until K results, then "done"):
#   floor     bench/agent_floor.c: libcurl + posix_spawn of sh -c per command
#             (spawned as lash spawns, a vfork-style clone)
#   fork      at K=200 only: the same floor with fork/exec (the old floor)
#   none      lash run bench/steps_none.lua (a local sandbox, isolation "none")
#   sandbox   lash run bench/steps_sandbox.lua (the sandbox capability: one
#             bubblewrap jail per sandbox, its supervisor runs each command)
#   bwrap     the floor with a bare bwrap command line before every command
#   nosave    at K=0 only: "none" with --no-save (no session written)
#   nodisk    at K=20 and 200: "none" without the default disk quota
# The runs save their sessions in a database of their own ($LASH_SESSIONS_DB
# in the scratch directory), not in the user's history.
# Medians of LASH_BENCH_STEPS_RUNS (default 5; 3 at K=1000), the four kinds
# interleaved so load hits them alike; per-step overhead = (median - floor
# median) / K; peak RSS from /usr/bin/time -v at K=200. Ends with issue
# 15 and 35 aims, each measured in this run next to its aim.
. "$(dirname "$0")/lib.sh"
LASH_BIN=${LASH_BIN:-$B/bin/lash}
RUNS=${LASH_BENCH_STEPS_RUNS:-5}
KS=${LASH_BENCH_STEPS_K:-"0 20 200 1000"}
cc -O2 -o "$out/agent_server" bench/agent_server.c || exit 1
cc -O2 -o "$out/agent_floor" bench/agent_floor.c $(pkg-config --cflags --libs libcurl) || exit 1
need "$LASH_BIN"
mkdir -p "$tmp/ws" "$tmp/state"
export LASH_SANDBOX_ROOT=$tmp/state OPENAI_API_KEY=bench LASH_SESSIONS_DB=$tmp/sessions.db
jail=yes
probe=$("$LASH_BIN" eval 'local ok = lash.sandbox.probe(); return ok and "yes" or "no"' 2>/dev/null)
[ "$probe" = yes ] || jail=
BWRAP=(bwrap --unshare-all --die-with-parent --new-session --ro-bind / / --tmpfs /tmp --dev /dev
       --proc /proc --bind "$tmp/ws" /workspace --chdir /workspace --clearenv
       --setenv PATH /usr/bin:/bin --)

# one KIND: the command line (the server's port in $port)
cmd_of() {
  case $1 in
    floor) echo "$out/agent_floor $port" ;;
    bwrap) echo "$out/agent_floor $port ${BWRAP[*]}" ;;
    fork) echo "env AGENT_FLOOR_FORK=1 $out/agent_floor $port" ;;
    none) echo "$LASH_BIN run --trust bench/steps_none.lua go --no-stream --max-steps 100000" ;;
    sandbox) echo "$LASH_BIN run --trust bench/steps_sandbox.lua go --no-stream --max-steps 100000" ;;
    nosave) echo "$LASH_BIN run --trust bench/steps_none.lua go --no-stream --max-steps 100000 --no-save" ;;
    nodisk) echo "env LASH_BENCH_NO_DISK=1 $LASH_BIN run --trust bench/steps_none.lua go --no-stream --max-steps 100000" ;;
  esac
}
# wall time of one run in ms
timed() {
  local s e
  s=$(date +%s%N)
  OPENAI_BASE_URL=http://127.0.0.1:$port/v1 $(cmd_of "$1") >"$tmp/out" 2>"$tmp/err" \
    || { echo "bench_steps: $1 failed:" >&2; tail -5 "$tmp/err" >&2; return 1; }
  e=$(date +%s%N)
  echo $(( (e - s) / 1000 ))
}
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ms() { awk -v u="$1" 'BEGIN { printf "%.1f", u / 1000 }'; }

kinds="floor none"
[ -n "$jail" ] && kinds="floor none sandbox bwrap"
for k in $KS; do
  start_server 50 "$out/agent_server" "$k" 1800 run_command
  n=$RUNS; [ "$k" -ge 1000 ] && n=$(( RUNS < 3 ? RUNS : 3 ))
  kk=$kinds; [ "$k" -eq 0 ] && kk="$kinds nosave"
  [ "$k" -gt 0 ] && [ "$k" -le 200 ] && kk="$kk nodisk"
  [ "$k" -eq 200 ] && kk="$kk fork"
  for kind in $kk; do : >"$tmp/t.$kind"; done
  for _ in $(seq "$n"); do
    for kind in $kk; do timed "$kind" >>"$tmp/t.$kind" || exit 1; done
  done
  unset med; declare -A med
  for kind in $kk; do med[$kind]=$(median <"$tmp/t.$kind"); done
  f=${med[floor]}
  over() { awk -v a="$1" -v f="$f" -v k="$k" 'BEGIN { if (k > 0) printf "%.2fx the floor, %+.3f ms/step", a / f, (a - f) / k / 1000; else printf "%.2fx the floor (cold start)", a / f }'; }
  row "agent K=$k: C floor (libcurl + posix_spawn)" "$(ms "$f")" "ms" "median of $n"
  [ -n "${med[fork]:-}" ] && row "agent K=$k: C floor with fork/exec instead (the old floor)" "$(ms "${med[fork]}")" "ms" "$(over "${med[fork]}")"
  row "agent K=$k: lash, isolation none" "$(ms "${med[none]}")" "ms" "$(over "${med[none]}")"
  [ "$k" -eq 0 ] && row "agent K=$k: lash, isolation none, --no-save" "$(ms "${med[nosave]}")" "ms" "$(over "${med[nosave]}")"
  [ -n "${med[nodisk]:-}" ] && row "agent K=$k: lash, isolation none, limits.disk = false" "$(ms "${med[nodisk]}")" "ms" "$(over "${med[nodisk]}"); the default disk quota's filesystem costs $(awk -v a="${med[none]}" -v b="${med[nodisk]}" 'BEGIN { printf "%.1f", (a - b) / 1000 }') ms of the row above"
  if [ -n "$jail" ]; then
    row "agent K=$k: lash, sandbox capability" "$(ms "${med[sandbox]}")" "ms" "$(over "${med[sandbox]}"); bare bwrap per command $(awk -v a="${med[bwrap]}" -v f="$f" -v k="$k" 'BEGIN { if (k > 0) printf "%+.3f ms/step", (a - f) / k / 1000; else printf "%.1f ms", a / 1000 }')"
    row "agent K=$k: bare bwrap per command (old floor)" "$(ms "${med[bwrap]}")" "ms" "$(over "${med[bwrap]}")"
  fi
  for kind in $kk; do echo "$k $kind ${med[$kind]}" >>"$tmp/goals"; done
  # cold start in instructions (callgrind): repeatable on a loaded machine,
  # where wall time at K=0 is mostly the scheduler's
  if { [ "$k" -eq 0 ] || [ "$k" -eq 20 ]; } && command -v valgrind >/dev/null; then
    ins=""
    ik="floor none"; [ "$k" -eq 0 ] && ik="floor none nosave"
    for kind in $ik; do
      OPENAI_BASE_URL=http://127.0.0.1:$port/v1 valgrind --tool=callgrind \
        --callgrind-out-file="$tmp/cg.$kind" $(cmd_of "$kind") >/dev/null 2>"$tmp/cg.err" || exit 1
      n=$(sed -n 's/.*Collected : *//p' "$tmp/cg.err")
      ins="$ins $n"
      echo "ins$k $kind $n" >>"$tmp/goals"
    done
    read -r fi ni si <<<"$ins"
    row "agent K=$k: instructions, C floor / lash isolation none (callgrind)" \
        "$(awk -v f="$fi" -v n="$ni" 'BEGIN { printf "%.1f / %.1f", f / 1e6, n / 1e6 }')" "M" "one run each; commands not counted"
    [ -n "${si:-}" ] && row "agent K=$k: instructions, lash isolation none --no-save (callgrind)" \
        "$(awk -v n="$si" 'BEGIN { printf "%.1f", n / 1e6 }')" "M" "one run"
  fi
  if [ "$k" -eq 200 ] && [ -x /usr/bin/time ]; then
    rss=""
    for kind in $kinds; do
      OPENAI_BASE_URL=http://127.0.0.1:$port/v1 /usr/bin/time -v $(cmd_of "$kind") >/dev/null 2>"$tmp/rss" || exit 1
      r=$(awk -F: '/Maximum resident set size/ { printf "%.1f", $2 / 1024 }' "$tmp/rss")
      rss="$rss, $kind $r"
      echo "rss $kind $r" >>"$tmp/goals"
    done
    row "agent K=200: peak RSS, whole process (/usr/bin/time -v)" "${rss#, }" "MiB" "one run each"
  fi
  kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null; srv=
done

# the aims (issues 15 and 35), from the medians above (same run, side by
# side); the floor is the posix_spawn one, without a jail
[ -s "$tmp/goals" ] || exit 0
goal() { row "goal: $1" "$2" "$3" "$4"; }
awk -v jail="$jail" '
  $1 == "rss" { rss[$2] = $3; next }
  $1 == "ins0" { ins[$2] = $3; next }
  $1 == "ins20" { ins20[$2] = $3; next }
  { t[$1, $2] = $3; ks[$1] = 1 }
  END {
    for (k in ks) {
      f = t[k, "floor"]
      if (k == 0) {
        printf "cold start (K=0, session saved), lash isolation none / floor|%.2f|x|aim <= 1.2\n", t[k, "none"] / f
        if ((k, "nosave") in t) printf "cold start (K=0), lash isolation none --no-save / floor|%.2f|x|no session written\n", t[k, "nosave"] / f
        if (jail) printf "cold start (K=0, session saved), lash sandbox capability / unsandboxed floor|%.2f|x|aim <= 1.2\n", t[k, "sandbox"] / f
        continue
      }
      printf "K=%d per-step overhead, lash isolation none|%+.3f|ms/step|aim <= +0.3 (%.2fx the floor)\n", k, (t[k, "none"] - f) / k / 1000, t[k, "none"] / f
      if ((k, "nodisk") in t) printf "K=%d per-step overhead, lash isolation none without the disk quota|%+.3f|ms/step|aim <= +0.3 (%.2fx the floor)\n", k, (t[k, "nodisk"] - f) / k / 1000, t[k, "nodisk"] / f
      if (jail) {
        printf "K=%d sandboxed agent / unsandboxed floor|%.2f|x|aim <= 1.2 (%+.3f ms/step; a bare bwrap per command: %.2fx)\n", k, t[k, "sandbox"] / f, (t[k, "sandbox"] - f) / k / 1000, t[k, "bwrap"] / f
      }
    }
    if ("none" in ins20) printf "K=20 instructions per step over the floor, lash isolation none|%.2f|M/step|load-independent view of the +0.3 ms/step aim (%.2f M of it is the cold start spread over 20 steps)\n", (ins20["none"] - ins20["floor"]) / 20e6, ("none" in ins) ? (ins["none"] - ins["floor"]) / 20e6 : 0
    if ("none" in ins) printf "cold start (K=0, session saved) in instructions, lash isolation none / floor|%.2f|x|aim <= 1.2 (callgrind; the wall-time ratio above is noisier)\n", ins["none"] / ins["floor"]
    if ("nosave" in ins) printf "cold start (K=0) in instructions, lash isolation none --no-save / floor|%.2f|x|callgrind\n", ins["nosave"] / ins["floor"]
    if ("none" in rss) printf "peak RSS K=200, lash isolation none|%s|MiB|floor %s MiB\n", rss["none"], rss["floor"]
    if ("sandbox" in rss) printf "peak RSS K=200, lash sandbox capability|%s|MiB|aim <= 15\n", rss["sandbox"]
  }' "$tmp/goals" | sort -t'|' -k1,1V | while IFS='|' read -r a b c d; do goal "$a" "$b" "$c" "$d"; done
