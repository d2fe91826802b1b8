#!/usr/bin/env bash
# bench/bench_sandbox.sh: the local sandbox (issue 3). (1) `exec` of `true`
# in a local sandbox against the bare bwrap command line of the same jail
# (built by the same code, bench/sandbox_bare.c; run with plain fork/exec),
# median of 200 each; aim: lash within 1.3x. (2) A command printing 1 GiB:
# lash's wall time against `head | cat > /dev/null` of the same bytes, and
# the lash process's peak memory against the aim 2 x max_output_bytes +
# 10 MiB. Prints rows `| name | value | unit | note |`.
. "$(dirname "$0")/lib.sh"
LASH_BIN=${LASH_BIN:-$B/bin/lash}
N=${LASH_BENCH_SANDBOX_RUNS:-200}
[ -x "$LASH_BIN" ] || { echo "bench_sandbox: $LASH_BIN is missing (run make)" >&2; exit 1; }
probe=$("$LASH_BIN" eval 'local ok, why = lash.sandbox.probe(); return ok and "yes" or "no " .. tostring(why)' 2>/dev/null)
if [ "${probe%% *}" != "yes" ]; then
  row "sandbox: exec of true" "skipped" "" "no bubblewrap jail here: ${probe#no }"
  exit 0
fi
mkdir -p "$B/bench"
cc -O2 -Wall $LASH_INC $(pkg-config --cflags lua5.4) bench/sandbox_bare.c "$B/liblash_internal.a" \
   -o "$B/bench/sandbox_bare" || exit 1
run_lua() { "$LASH_BIN" eval "_G.arg = {$1}; dofile('bench/sandbox_bench.lua')" 2>"$tmp/err" \
              || { cat "$tmp/err" >&2; return 1; }; }

# (1) exec of true: four interleaved rounds of N/4 each, so that load from
# elsewhere on the machine hits both sides alike; the median of the rounds
bwrap=$(command -v bwrap)
q=$((N / 4))
ls_med=(); ls_p90=(); bs_med=(); bs_p90=(); fe_med=(); id=""
for round in 1 2 3 4; do
  read -r m p i < <(run_lua "'exec', '$tmp/state', $q") || exit 1
  ls_med+=("$m"); ls_p90+=("$p"); id=$i
  [ "$round" = 1 ] && { "$B/bench/sandbox_bare" 10 "$tmp/state" "$id" /workspace "$bwrap" true >/dev/null || exit 1; }
  read -r m p < <("$B/bench/sandbox_bare" "$q" "$tmp/state" "$id" /workspace "$bwrap" true) || exit 1
  bs_med+=("$m"); bs_p90+=("$p")
  read -r m p < <("$B/bench/sandbox_bare" "$q" "$tmp/state" "$id" /workspace - true) || exit 1
  fe_med+=("$m")
done
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { printf "%.3f", (a[int((NR + 1) / 2)] + a[int(NR / 2) + 1]) / 2 }'; }
lmed=$(median "${ls_med[@]}"); lp90=$(median "${ls_p90[@]}")
bmed=$(median "${bs_med[@]}"); bp90=$(median "${bs_p90[@]}")
fmed=$(median "${fe_med[@]}")
row "sandbox: exec of true, lash (median, $N runs)" "$lmed" "ms" "p90 $lp90 ms; the sandbox's jail built once, its supervisor forks each command; pipes, loop, metadata"
row "sandbox: exec of true, bare bwrap (median, $N runs)" "$bmed" "ms" "p90 $bp90 ms; the same jail's command line, fork/exec only"
row "sandbox: exec of true, lash / bare bwrap" \
    "$(awk -v l="$lmed" -v b="$bmed" 'BEGIN { printf "%.2f", l / b }')" "x" \
    "4 interleaved rounds of $q, median of the round medians"
row "sandbox: exec of true, bare fork/exec (median, $N runs)" "$fmed" "ms" "no jail, no lash: the floor"
row "sandbox: exec of true, lash - bare fork/exec" \
    "$(awk -v l="$lmed" -v f="$fmed" 'BEGIN { printf "%+.3f", l - f }')" "ms" "aim <= +1 ms (issue 15: the jail built once per sandbox)"

# (2) 1 GiB of output
G=1073741824
for max in 1048576 16777216; do
  read -r wall peak base len trunc < <(run_lua "'bigout', '$tmp/state', $G, $max") || exit 1
  mib=$((max / 1048576))
  row "sandbox: 1 GiB of output through lash (max_output_bytes $mib MiB)" "$wall" "s" \
      "kept $len bytes, truncated=$trunc; $(awk -v w="$wall" 'BEGIN { printf "%.2f", 1.073741824 / w }') GB/s"
  row "sandbox: peak RSS of lash for 1 GiB (max_output_bytes $mib MiB)" \
      "$(awk -v p="$peak" 'BEGIN { printf "%.1f", p / 1024 }')" "MiB" \
      "aim < $((2 * mib + 10)) MiB; the process was $(awk -v b="$base" 'BEGIN { printf "%.1f", b / 1024 }') MiB before (Lua, libcurl, TLS), the command added $(awk -v p="$peak" -v b="$base" 'BEGIN { printf "%.1f", (p - b) / 1024 }') MiB (2 x max = $((2 * mib)) MiB)"
done
t0=$(date +%s.%N)
head -c $G /dev/zero | cat > /dev/null
t1=$(date +%s.%N)
row "sandbox: 1 GiB through head piped to cat into /dev/null (baseline)" \
    "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')" "s" "the same bytes without a jail or lash"

# (3) a sandbox's whole life (create, first command, destroy) with the
# default disk quota (made at the first command: mkfs.ext4, loop device,
# mount; given back at destroy) and with --limit disk=off, interleaved
D=${LASH_BENCH_SANDBOX_LIVES:-10}
life() {
  local s e id
  s=$(date +%s%N)
  id=$(LASH_SANDBOX_ROOT=$tmp/state "$LASH_BIN" sandbox create --timeout 600 "$@" 2>/dev/null) || return 1
  LASH_SANDBOX_ROOT=$tmp/state "$LASH_BIN" sandbox exec "$id" -- true || return 1
  LASH_SANDBOX_ROOT=$tmp/state "$LASH_BIN" sandbox destroy "$id" || return 1
  e=$(date +%s%N)
  awk -v n=$((e - s)) 'BEGIN { printf "%.1f", n / 1e6 }'
}
on=(); off=(); quota=""
for _ in $(seq "$D"); do
  on+=("$(life)") || exit 1
  off+=("$(life --limit disk=off)") || exit 1
done
id=$(LASH_SANDBOX_ROOT=$tmp/state "$LASH_BIN" sandbox create --timeout 60 2>/dev/null)
grep -q '"disk": *[1-9]' "$tmp/state/$id/meta.json" && quota=yes
LASH_SANDBOX_ROOT=$tmp/state "$LASH_BIN" sandbox destroy "$id"
omed=$(median "${on[@]}"); fmed=$(median "${off[@]}")
if [ -n "$quota" ]; then
  row "sandbox: a life (create, exec true, destroy), default disk quota (median, $D)" "$omed" "ms" "three lash processes; the quota made at the first command"
else
  row "sandbox: a life (create, exec true, destroy), default (no quota here) (median, $D)" "$omed" "ms" "lash cannot make a disk quota here"
fi
row "sandbox: a life, --limit disk=off (median, $D)" "$fmed" "ms" "no quota"
row "sandbox: a life, default quota - disk=off" "$(awk -v a="$omed" -v b="$fmed" 'BEGIN { printf "%+.1f", a - b }')" "ms" "what the quota costs a sandbox, once"
