# bench/lib.sh: what the benchmark scripts share, sourced first thing:
#   . "$(dirname "$0")/lib.sh"
# It moves to the checkout's root and sets B (the build directory), out
# (where the benchmarks' own binaries go), LASH_INC (the include path of
# lash's headers), a scratch directory $tmp removed at exit together with
# the loopback server start_server started.
set -u
cd "$(dirname "$0")/.." || exit 1
B=${LASH_BUILD:-build}
BENCH=$(basename "$0" .sh)
LASH_INC="-Isrc/1-base -Isrc/2-runtime -Isrc/3-transport -Isrc/4-sandbox -Isrc/5-backend/local/prim -Isrc/5-backend/local -Isrc/5-backend/modal -Isrc/6-lua -Isrc/7-embed -Isrc/8-cli"
out=$B/bench
mkdir -p "$out"
# (a+x: a sandbox as root runs as a uid of its own and must reach its state)
tmp=$(mktemp -d "/tmp/lash-$BENCH.XXXXXX"); chmod 711 "$tmp"
srv=
# sandboxes a bench left in its state root hold mounts (their disk quota)
# that rm cannot remove: destroy them first
cleanup_bench() {
  local b lash=${LASH_BIN:-$B/bin/lash}
  [ -n "$srv" ] && kill "$srv" 2>/dev/null
  for b in "$tmp"/state/lb-*; do
    [ -d "$b" ] && [ -x "$lash" ] && LASH_SANDBOX_ROOT=$tmp/state "$lash" sandbox destroy "${b##*/}" >/dev/null 2>&1
  done
  rm -rf "$tmp"
}
trap cleanup_bench EXIT

# row NAME VALUE UNIT NOTE: one row of make bench's table
row() { echo "| $1 | $2 | $3 | $4 |"; }

# need FILE: stop with a message when the build lacks FILE
need() { [ -e "$1" ] || { echo "$BENCH: $1 is missing (run make)" >&2; exit 1; }; }

# start_server TRIES COMMAND...: start a loopback server that prints its
# port on stdout; waits up to TRIES x 50 ms for it and sets $srv and $port
start_server() {
  local tries=$1 _; shift
  "$@" >"$tmp/port" &
  srv=$!
  for _ in $(seq "$tries"); do [ -s "$tmp/port" ] && break; sleep 0.05; done
  port=$(cat "$tmp/port")
  [ -n "$port" ] || { echo "$BENCH: the server did not start" >&2; exit 1; }
}
