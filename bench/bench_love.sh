#!/usr/bin/env bash
# LÖVE (issue 13): the frame-time cost of stepping lash inside a real engine.
# examples/love runs twice under xvfb-run with mesa's software GL, N frames
# each at 60 Hz: once with --no-agent (the same world and drawing, no lash
# at all), once with the NPC agent (npc.lua: look, a sandbox command,
# walk_to, open_chest) started again whenever a run ends, lash_step(S, 1)
# once per frame. A frame's work is everything but the sleep to the next
# tick: events, update (lash_step inside), draw, present. Each run creates
# and destroys a local sandbox: those steps are the worst ones.
. "$(dirname "$0")/lib.sh"
B=$(cd "$B" && pwd)
N=${LASH_BENCH_LOVE_FRAMES:-600}
if ! command -v love >/dev/null 2>&1 || ! command -v xvfb-run >/dev/null 2>&1; then
  row "love: frame work" "skipped" "" "love or xvfb-run is not installed"
  exit 0
fi
[ -f "$B/liblash.so" ] || { echo "bench_love: $B/liblash.so is missing (run make)" >&2; exit 1; }
export LASH_SANDBOX_ROOT=$tmp/sandboxes
game() { # OUTDIR ARGS...
  local out=$1; shift
  mkdir -p "$out"
  LIBGL_ALWAYS_SOFTWARE=1 xvfb-run -a -s "-screen 0 1024x768x24" \
    timeout -k 10 600 love examples/love --lib "$B/liblash.so" --out "$out" --frames "$N" "$@" >/dev/null 2>"$out/stderr" </dev/null
}
game "$tmp/base" --no-agent || { echo "bench_love: the game without the agent failed" >&2; cat "$tmp/base/stderr" >&2; exit 1; }
game "$tmp/agent" || { echo "bench_love: the game with the agent failed" >&2; cat "$tmp/agent/stderr" >&2; exit 1; }
python3 - "$tmp/base/result.json" "$tmp/agent/result.json" "$N" <<'PY'
import json, sys
base, agent, n = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
def row(name, value, unit, note): print(f"| {name} | {value} | {unit} | {note} |")
row("love: frame work p50, no lash", "%.2f" % base["frame_ms_p50"], "ms", f"{n} frames at 60 Hz, Xvfb + llvmpipe; late {base['late_frames']}")
row("love: frame work p50, NPC agent stepped", "%.2f" % agent["frame_ms_p50"], "ms",
    "%.2fx; %d runs done in %s frames" % (agent["frame_ms_p50"] / base["frame_ms_p50"], agent["runs"], n))
row("love: frame work p99, no lash", "%.2f" % base["frame_ms_p99"], "ms", "max %.2f" % base["frame_ms_max"])
row("love: frame work p99, NPC agent stepped", "%.2f" % agent["frame_ms_p99"], "ms",
    "%.2fx; max %.2f; late frames %d (no lash: %d)" % (agent["frame_ms_p99"] / base["frame_ms_p99"], agent["frame_ms_max"], agent["late_frames"], base["late_frames"]))
row("love: time in lash_step(S, 1 ms), p50 / p99", "%.2f / %.2f" % (agent["step_ms_p50"], agent["step_ms_p99"]), "ms",
    "max %.2f (a run's first step creates its sandbox, its last destroys it)" % agent["step_ms_max"])
row("love: CPU in lash_step, p50 / p99", "%.2f / %.2f" % (agent["step_cpu_ms_p50"], agent["step_cpu_ms_p99"]), "ms",
    "the thread's CPU time; the rest of the step is waiting for I/O, up to the budget")
PY
