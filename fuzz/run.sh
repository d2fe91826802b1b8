#!/usr/bin/env bash
# fuzz/run.sh [name...]: builds every fuzz/fuzz_*.c (or the named ones) as a
# libFuzzer binary with ASan and UBSan, runs each for FUZZ_SECONDS (default
# 30) and prints one summary; exits non-zero if any target found a failure.
#
# A target names the sources it needs in a comment line of its own:
#   // fuzz-sources: src/1-base/pb.c src/3-transport/grpc.c
#   // fuzz-flags: -DSOMETHING            (optional, extra compiler flags)
# A target without fuzz-sources gets every .c of src/1-base .. src/7-embed, with the Lua
# and libcurl flags. Binaries, corpora and crash files go to build/fuzz
# (FUZZ_BUILD); seed inputs may be kept in fuzz/corpus/<name>/.
set -u
cd "$(dirname "$0")/.."
SECS=${FUZZ_SECONDS:-30}
CLANG=${CLANG:-clang}
OUT=${FUZZ_BUILD:-build/fuzz}
FLAGS=(-g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined
       -fno-sanitize-recover=undefined -D_GNU_SOURCE -Isrc/1-base -Isrc/2-runtime -Isrc/3-transport -Isrc/4-sandbox -Isrc/5-backend/local/prim -Isrc/5-backend/local -Isrc/5-backend/modal -Isrc/6-lua -Isrc/7-embed -Isrc/8-cli)

if ! command -v "$CLANG" >/dev/null; then
  echo "fuzz: $CLANG not found; install clang (apt-get install clang) or set CLANG=" >&2
  exit 1
fi
mkdir -p "$OUT"
probe=$OUT/.probe.c
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$probe"
if ! "$CLANG" "${FLAGS[@]}" "$probe" -o "$OUT/.probe" 2>"$OUT/.probe.log"; then
  echo "fuzz: $CLANG cannot build libFuzzer targets (-fsanitize=fuzzer):" >&2
  cat "$OUT/.probe.log" >&2
  echo "install a clang with its compiler-rt (Debian: clang, libclang-rt-dev on newer releases)" >&2
  exit 1
fi

targets=()
if [ $# -gt 0 ]; then
  for n in "$@"; do targets+=("fuzz/${n%.c}.c"); done
else
  for f in fuzz/fuzz_*.c; do [ -f "$f" ] && targets+=("$f"); done
fi
if [ ${#targets[@]} -eq 0 ]; then
  echo "fuzz: no fuzz/fuzz_*.c targets" >&2
  exit 1
fi

pass=0; failed=()
for f in "${targets[@]}"; do
  name=$(basename "$f" .c)
  if [ ! -f "$f" ]; then
    echo "--- $name: no such target $f"; failed+=("$name"); continue
  fi
  read -r -a srcs <<<"$(sed -n 's#^// *fuzz-sources: *##p' "$f" | tr '\n' ' ')"
  read -r -a extra <<<"$(sed -n 's#^// *fuzz-flags: *##p' "$f" | tr '\n' ' ')"
  libs=()
  if [ ${#srcs[@]} -eq 0 ]; then
    srcs=()
    for s in src/[1-7]-*/*.c src/5-backend/*/*.c; do [ -f "$s" ] && srcs+=("$s"); done
    read -r -a pc_cflags <<<"$(pkg-config --cflags lua5.4 libcurl yaml-0.1 sqlite3)"
    read -r -a libs <<<"$(pkg-config --libs lua5.4 libcurl yaml-0.1 sqlite3) -lm -ldl"
    extra+=("${pc_cflags[@]}")
  fi
  log=$OUT/$name.log
  if ! "$CLANG" "${FLAGS[@]}" "${extra[@]}" "$f" "${srcs[@]}" -o "$OUT/$name" "${libs[@]}" >"$log" 2>&1; then
    echo "--- $name: BUILD FAILED"; tail -n 30 "$log"; failed+=("$name"); continue
  fi
  corpus=("$OUT/corpus/$name")
  mkdir -p "${corpus[0]}"
  [ -d "fuzz/corpus/$name" ] && corpus+=("fuzz/corpus/$name")
  if "$OUT/$name" -max_total_time="$SECS" -print_final_stats=1 \
       -artifact_prefix="$OUT/$name-" "${corpus[@]}" >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "--- $name: ok (${runs:-?} inputs in ${SECS}s)"
    pass=$((pass + 1))
  else
    echo "--- $name: FAILED (log $log)"
    grep -E 'invariant failed|ERROR|SUMMARY|Test unit written' "$log" | head -n 10
    failed+=("$name")
  fi
done
rm -f "$probe" "$OUT/.probe" "$OUT/.probe.log"
echo
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, ${#failed[@]} failed"
[ ${#failed[@]} -eq 0 ]
