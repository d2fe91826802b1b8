#!/usr/bin/env bash
# The LÖVE example (examples/love): Debian's LÖVE 11.4 (LuaJIT) runs the game
# under Xvfb with software GL; the game loads liblash through the FFI, an NPC
# agent (npc.lua, an offline scripted model) calls the game's tools (C
# callbacks made with ffi.cast: look at once, walk_to answered on arrival
# frames later, open_chest on the next frame) and run_command in a real local
# sandbox, while lash_step runs once per frame with a 1 ms budget. Checks the
# run's outcome, the game state the agent changed, the events, the late-frame
# count the game reports, and the screenshot the game took (not blank: it
# shows Ada on the chest's tile). A liblash that binds its Lua calls to LÖVE's
# LuaJIT segfaults in lash_open here. TAP; nothing is timed (frame times are
# reported, and measured by `bash bench/run.sh love`).
. "$(dirname "$0")/../lib.sh"
ROOT=$PWD
B=$(cd "${LASH_BUILD:-build}" && pwd)
LASH=${LASH_BIN:-$ROOT/build/bin/lash}

command -v love >/dev/null 2>&1 || skip_all "love is not installed (make deps installs Debian's love)"
command -v xvfb-run >/dev/null 2>&1 || skip_all "xvfb-run is not installed (make deps installs xvfb and xauth)"
command -v python3 >/dev/null 2>&1 || skip_all "needs python3 to read the results"
[ -f "$B/liblash.so" ] || skip_all "$B/liblash.so is not built"
[ -x "$LASH" ] || skip_all "$LASH is not built (it probes for a sandbox)"
probe=$(jail_probe)
if [ "${probe%% *}" != "yes" ]; then
  skip_all "no bubblewrap jail here (the NPC runs a sandbox command): ${probe#no }"
fi

lua5.4 tests/integration/ffi_cdef_check.lua src/7-embed/lash.h examples/ffi/lash_ffi.lua 2>&1 | sed 's/^/# /'
ok "${PIPESTATUS[0]}" "lash_ffi.lua declares exactly lash.h's API and constants"

new_tmp work /tmp/lash-love.XXXXXX
chmod 711 "$work"
export LASH_SANDBOX_ROOT=$work/sandboxes
# A sanitized liblash (make check) needs the sanitizer runtimes loaded
# first; the engine's own leaks are not lash's. liblash is preloaded too:
# dlopen'ed later under ASan, its libcurl's gnutls constructor deadlocks on
# glibc's locale lock against LÖVE's running threads
preload=(env)
if [ -n "${LASH_SANITIZED:-}" ]; then
  preload=(env LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so):$B/liblash.so" ASAN_OPTIONS=detect_leaks=0)
fi
# Xvfb's default screen is 640x480x8: LÖVE needs a 24-bit visual; mesa's
# software rasterizer draws (there is no GPU)
# (the timeout is love's own: xvfb-run, when killed, leaves its child running)
LIBGL_ALWAYS_SOFTWARE=1 xvfb-run -a -s "-screen 0 1024x768x24" timeout -k 10 300 "${preload[@]}" \
  love examples/love --lib "$B/liblash.so" --out "$work" >"$work/stdout" 2>"$work/stderr" </dev/null
rc=$?
ok $rc "the game ran to the end and exited 0 (exit $rc$([ $rc -ge 128 ] && echo ", signal $((rc - 128))"))"
if [ $rc -ne 0 ]; then
  grep -v '^ALSA\|^AL lib' "$work/stderr" | sed 's/^/# stderr: /' | head -20
fi
[ -f "$work/result.json" ] || { ok 1 "the game wrote result.json (it died before)"; done_testing; }

check() { # description, python expression over r (result.json) and ev (the events)
  python3 - "$work" "$2" <<'PY' >"$work/check" 2>&1
import json, sys
w = sys.argv[1]
r = json.load(open(w + "/result.json"))
ev = [json.loads(l) for l in open(w + "/events.jsonl")]
def of(t, name=None): return [e for e in ev if e["type"] == t and (name is None or e.get("name") == name)]
ok = eval(sys.argv[2])
if not ok:
    r.pop("result", None)
    print(json.dumps(r, indent=1)[:2500])
sys.exit(0 if ok else 1)
PY
  local rc=$?; ok $rc "$1"; [ $rc -ne 0 ] && sed 's/^/# /' "$work/check" | head -40; return 0
}
check "the run ended done" 'r["status"] == "done" and r["error"] is None'
check "the agent changed the game: Ada stands on the chest's tile, the chest is open, 3 gold" \
  'r["npc"] == {"x": 12, "y": 7} and r["chest_open"] is True and r["gold"] == 3'
check "its answer says what it did, from the tools' real results" \
  'r["output"] == "I worked out the sign in the sandbox, walked to the chest (arrived at (12, 7) after 68 frames) and opened it: the chest holds 3 gold coins"'
check "it called the game's tools and the sandbox in order" \
  '[e["name"] for e in of("tool_call")] == ["look", "run_command", "walk_to", "open_chest"]'
check "run_command ran in a real sandbox and computed the sign's riddle" \
  'of("tool_result", "run_command")[0]["content"].strip().endswith("12 7") and of("tool_result", "run_command")[0]["status"] == "ok"'
check "walk_to was answered 68 frames later, on arrival (17 tiles, 4 frames each)" \
  'of("tool_result", "walk_to")[0]["content"] == "arrived at (12, 7) after 68 frames"'
check "the events the game counted are the events it received" \
  'r["events"] == {t: len(of(t)) for t in set(e["type"] for e in ev)} and r["events"]["run_start"] == 1 and r["events"]["run_end"] == 1'
check "the game reports its frames and late frames (work over one 16.7 ms frame)" \
  'r["frames"] > 68 and 0 <= r["late_frames"] <= r["frames"]'
python3 -c '
import json, sys; r = json.load(open(sys.argv[1]))
print("# frames %d, late %d; frame work p50 %.2f ms p99 %.2f ms; lash_step p50 %.2f ms p99 %.2f ms" % (r["frames"], r["late_frames"], r["frame_ms_p50"], r["frame_ms_p99"], r["step_ms_p50"], r["step_ms_p99"]))
for l in r["late"][:8]: print("#   late frame %d: work %.1f ms, lash_step %s ms" % (l["frame"], l["work_ms"], l["step_ms"]))' "$work/result.json"

# The screenshot: LÖVE's own capture of the last frame
if [ -f "$work/screenshot.png" ]; then
  # Ada's tile centre, the chest under her, two grass tiles of the checkerboard
  px=$(python3 tests/integration/png_pixels.py "$work/screenshot.png" 500,300 486,314 20,380 60,380 2>&1)
  echo "$px" | sed 's/^/# /'
  near() { # "X,Y" R G B: the pixel is that colour, give or take 6 a channel
    echo "$px" | awk -v at="$1" -v r="$2" -v g="$3" -v b="$4" \
      '$1 == at { d = 0; if (($2-r)^2 > 36 || ($3-g)^2 > 36 || ($4-b)^2 > 36) d = 1; found = 1 } END { exit !(found && !d) }'
  }
  echo "$px" | grep -q '^size 800 600$'; ok $? "the screenshot is the 800x600 window"
  colours=$(echo "$px" | sed -n 's/^colours //p')
  [ "${colours:-0}" -ge 16 ]; ok $? "it is not blank (${colours:-0} distinct colours)"
  near 500,300 51 114 255; ok $? "it shows Ada (blue) on the chest's tile (12, 7)"
  near 486,314 242 191 25; ok $? "and the open chest (gold) under her"
  near 20,380 45 132 56 && near 60,380 45 142 56; ok $? "and the checkerboard of grass"
else
  ok 1 "the game saved a screenshot"
fi
done_testing
