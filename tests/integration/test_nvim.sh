#!/usr/bin/env bash
# The Neovim example (examples/nvim): Debian's nvim (LuaJIT) runs headless
# with only the plugin on its runtimepath, loads build/liblash.so through the
# FFI, and :Lash runs the scripted agent on a buffer: lash is stepped from
# Neovim's own loop (a vim.loop poll on lash_fd), the agent edits the buffer
# through the plugin's set_lines tool, and its answer streams into the
# lash://output buffer. Checks the edited buffer, the output buffer, the
# events, and that nvim exits cleanly (a liblash that binds its Lua calls to
# Neovim's LuaJIT segfaults here). TAP; nothing is timed.
. "$(dirname "$0")/../lib.sh"
ROOT=$PWD
B=$(cd "${LASH_BUILD:-build}" && pwd)

command -v nvim >/dev/null 2>&1 || skip_all "nvim is not installed (make deps installs Debian's neovim)"
[ -f "$B/liblash.so" ] || skip_all "$B/liblash.so is not built"
command -v python3 >/dev/null 2>&1 || skip_all "needs python3 to read the results"

lua5.4 tests/integration/ffi_cdef_check.lua src/7-embed/lash.h examples/nvim/lua/lash_ffi.lua 2>&1 | sed 's/^/# /'
ok "${PIPESTATUS[0]}" "the plugin's lash_ffi.lua declares exactly lash.h's API and constants"

new_tmp work /tmp/lash-nvim.XXXXXX
printf '%s\n' "Shopping" "TODO buy milk" "  TODO: call the baker" "bread (have it)" > "$work/todo.txt"
cat > "$work/driver.lua" <<'LUA'
-- runs inside nvim: the user's steps, then the outcome into files
local out = os.getenv("LASH_NVIM_OUT")
vim.cmd("edit " .. vim.fn.fnameescape(out .. "/todo.txt"))
local target = vim.api.nvim_get_current_buf()
vim.cmd("Lash Mark my todos done")
local last = require("lash_nvim").wait(120000)
local function lines_of(name)
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_get_name(b):find(name, 1, true) then return vim.api.nvim_buf_get_lines(b, 0, -1, false) end
  end
  return {}
end
local f = assert(io.open(out .. "/result.json", "w"))
f:write(vim.json.encode {
  status = last and last.status, output = last and last.output, error = last and last.error,
  events = last and last.events, buffer = vim.api.nvim_buf_get_lines(target, 0, -1, false),
  output_buffer = lines_of("lash://output"), windows = #vim.api.nvim_list_wins(),
})
f:close()
-- quitting with a run in flight: VimLeavePre closes lash, which cancels it
vim.cmd("Lash Mark my todos done again")
vim.wait(30, function() return false end)
vim.cmd("qa!")
LUA

# -u NONE loads no plugins: the test puts this one on the runtimepath itself
# A sanitized liblash (make check) needs the sanitizer runtimes loaded
# first; the engine's own leaks are not lash's
preload=(env)
if [ -n "${LASH_SANITIZED:-}" ]; then
  preload=(env LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)" ASAN_OPTIONS=detect_leaks=0)
fi
"${preload[@]}" LASH_NVIM_OUT=$work LASH_LIB=$B/liblash.so timeout 180 nvim --headless -u NONE -i NONE \
  --cmd "set rtp^=$ROOT/examples/nvim" -c "runtime plugin/lash.lua" -c "luafile $work/driver.lua" \
  >"$work/stdout" 2>"$work/stderr" </dev/null
rc=$?
ok $rc "nvim --headless ran the plugin and exited cleanly, a second run still in flight (exit $rc$([ $rc -ge 128 ] && echo ", signal $((rc - 128))"))"
[ -s "$work/stderr" ] && sed 's/^/# stderr: /' "$work/stderr" | head -20
[ ! -s "$work/stderr" ]; ok $? "nothing on stderr (no Lua errors, no E-messages)"

check() { # description, python expression over r (the result)
  python3 - "$work/result.json" "$2" <<'PY' >"$work/check" 2>&1
import json, sys
r = json.load(open(sys.argv[1]))
ok = eval(sys.argv[2])
if not ok: print(json.dumps(r, indent=1)[:3000])
sys.exit(0 if ok else 1)
PY
  local rc=$?; ok $rc "$1"; [ $rc -ne 0 ] && sed 's/^/# /' "$work/check" | head -40; return 0
}
if [ -f "$work/result.json" ]; then
  check "the run ended done" 'r["status"] == "done"'
  check "the agent edited the buffer through set_lines" \
    'r["buffer"] == ["Shopping", "DONE buy milk", "  DONE call the baker", "bread (have it)"]'
  check "its answer, from the buffer it read back" 'r["output"] == "Marked 2 items done: buy milk, call the baker."'
  check "the answer streamed into lash://output" \
    'any("Marked 2 items done: buy milk, call the baker." in l for l in r["output_buffer"])'
  check "the output buffer shows the tool calls and results" \
    'any(l.startswith("[tool set_lines") for l in r["output_buffer"]) and any(l.startswith("[set_lines: replaced lines 3..3") for l in r["output_buffer"])'
  check "events arrived: two set_lines calls in one turn, streamed text, one run_end" \
    'r["events"].get("tool_call") == 4 and r["events"].get("tool_result") == 4 and r["events"].get("run_end") == 1 and r["events"].get("text_delta", 0) >= 1'
  check "the output buffer opened in a split" 'r["windows"] == 2'
else
  ok 1 "the driver wrote its result (nvim died before)"
fi
# a library that is not there: a clear error, and the editor carries on
cat > "$work/driver_missing.lua" <<'LUA'
local out = os.getenv("LASH_NVIM_OUT")
require("lash_nvim").setup { lib = out .. "/missing/liblash.so" }
-- :Lash reports the failure as an error (vim.notify at ERROR level)
local raised, msg = pcall(vim.cmd, "Lash anything")
local last = require("lash_nvim").last
io.stderr:write(tostring(msg), "\n")
local f = assert(io.open(out .. "/missing.json", "w"))
f:write(vim.json.encode { status = last.status, error = last.error })
f:close()
vim.cmd("qa!")
LUA
"${preload[@]}" LASH_NVIM_OUT=$work timeout 180 nvim --headless -u NONE -i NONE \
  --cmd "set rtp^=$ROOT/examples/nvim" -c "runtime plugin/lash.lua" -c "luafile $work/driver_missing.lua" \
  >"$work/stdout2" 2>"$work/stderr2" </dev/null
rc=$?
ok $rc "with a missing library nvim still exits cleanly (exit $rc)"
python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if r["status"] == "failed" and sys.argv[2] + "/missing/liblash.so" in r["error"] else 1)' "$work/missing.json" "$work" 2>/dev/null
ok $? "the error names the library it could not load"
grep -q "lash: .*missing/liblash.so" "$work/stderr2"; ok $? "and the user sees it (vim.notify)"
done_testing
