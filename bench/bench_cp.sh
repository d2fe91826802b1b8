#!/usr/bin/env bash
# bench/bench_cp.sh: files in and out of a local sandbox (issue 31):
# `lash sandbox cp` of a 1 GiB file in and back out, and of a directory of
# 1 GiB (64 files of 16 MiB) in and out as one tar stream; wall time
# against `cp` of the same bytes on the host, and lash's peak memory (the
# aim: bounded, whatever the size). Prints rows `| name | value | unit | note |`.
. "$(dirname "$0")/lib.sh"
LASH_BIN=${LASH_BIN:-$B/bin/lash}
MIB=${LASH_BENCH_CP_MIB:-1024}
[ -x "$LASH_BIN" ] || { echo "bench_cp: $LASH_BIN is missing (run make)" >&2; exit 1; }
probe=$("$LASH_BIN" eval 'local ok, why = lash.sandbox.probe(); return ok and "yes" or "no " .. tostring(why)' 2>/dev/null)
if [ "${probe%% *}" != "yes" ]; then
  row "cp: 1 GiB in and out" "skipped" "" "no bubblewrap jail here: ${probe#no }"
  exit 0
fi
export LASH_SANDBOX_ROOT=$tmp/state
head -c $((MIB * 1048576)) /dev/urandom > "$tmp/big" || exit 1
mkdir "$tmp/dir"
per=$((MIB / 64))
for i in $(seq 1 64); do head -c $((per * 1048576)) "$tmp/big" > "$tmp/dir/f$i"; done
id=$("$LASH_BIN" sandbox create --timeout 1800) || exit 1
# timed RUN...: wall seconds and peak RSS (KiB) of the command
timed() {
  /usr/bin/time -f '%e %M' -o "$tmp/time" "$@" >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; return 1; }
  cat "$tmp/time"
}
read -r up_s up_k < <(timed "$LASH_BIN" sandbox cp "$tmp/big" "$id:big") || exit 1
read -r down_s down_k < <(timed "$LASH_BIN" sandbox cp "$id:big" "$tmp/big.back") || exit 1
cmp -s "$tmp/big" "$tmp/big.back" || { echo "bench_cp: the file came back different" >&2; exit 1; }
read -r dup_s dup_k < <(timed "$LASH_BIN" sandbox cp "$tmp/dir" "$id:dir") || exit 1
read -r ddown_s ddown_k < <(timed "$LASH_BIN" sandbox cp "$id:dir" "$tmp/dir.back") || exit 1
diff -r -q "$tmp/dir" "$tmp/dir.back" >/dev/null || { echo "bench_cp: the directory came back different" >&2; exit 1; }
read -r cp_s _ < <(timed cp "$tmp/big" "$tmp/big.cp") || exit 1
read -r base_s base_k < <(timed "$LASH_BIN" eval 'return 1') || exit 1
"$LASH_BIN" sandbox destroy "$id" >/dev/null 2>&1
row "cp: a $MIB MiB file into a sandbox" "$up_s" "s" "peak RSS $((up_k / 1024)) MiB (lash eval alone: $((base_k / 1024)) MiB); host cp of the file: $cp_s s"
row "cp: a $MIB MiB file out of a sandbox" "$down_s" "s" "peak RSS $((down_k / 1024)) MiB"
row "cp: a $MIB MiB directory (64 files) in, one tar stream" "$dup_s" "s" "peak RSS $((dup_k / 1024)) MiB"
row "cp: a $MIB MiB directory (64 files) out, one tar stream" "$ddown_s" "s" "peak RSS $((ddown_k / 1024)) MiB"
