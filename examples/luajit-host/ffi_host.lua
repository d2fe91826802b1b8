-- ffi_host.lua: lash from a LuaJIT script through the FFI, the way a LÖVE
-- game or a Neovim plugin reaches it: ffi.load the shared library, declare
-- the part of lash.h in use, register a tool made with ffi.cast and run an
-- agent on the scripted offline `test` model (it calls every tool once,
-- then answers with a JSON summary of the results).
--
--   luajit examples/luajit-host/ffi_host.lua [path/to/liblash.so]
local ffi = require "ffi"

ffi.cdef [[
typedef struct lash_State lash_State;
typedef struct lash_Run lash_Run;
typedef struct lash_Call lash_Call;
typedef void (*lash_ToolFn)(lash_Call *call, const char *args_json, void *ud);
lash_State *lash_open(const void *opts);
int lash_close(lash_State *S);
const char *lash_errmsg(lash_State *S);
const char *lash_version(void);
int lash_load_spec_string(lash_State *S, const char *text, const char *name);
int lash_register_tool(lash_State *S, const char *name, const char *description,
                       const char *json_schema, lash_ToolFn fn, void *ud);
int lash_call_return(lash_Call *call, const char *text);
int lash_run_start(lash_State *S, const char *prompt, const char *options_json,
                   lash_Run **run);
int lash_step(lash_State *S, int budget_ms);
int lash_run_status(const lash_Run *run);
int lash_run_result(const lash_Run *run, const char **output, const char **result_json);
int lash_run_free(lash_Run *run);
]]

local lash = ffi.load(arg[1] or "lash")
local S = lash.lash_open(nil)
local function check(st)
  if st ~= 0 then error("lash: " .. ffi.string(lash.lash_errmsg(S)), 2) end
end

-- a callback LuaJIT makes; lash calls it from inside lash_step
local lamps = 0
local light = ffi.cast("lash_ToolFn", function(call, args)
  lamps = lamps + 1
  lash.lash_call_return(call, ("lit lamp %d (args %s)"):format(lamps, ffi.string(args)))
end)

check(lash.lash_load_spec_string(S,
  "return { name = 'lamplighter', model = 'test', instructions = 'Answer briefly.' }",
  "lamplighter.lua"))
check(lash.lash_register_tool(S, "light", "Light a lamp.",
  '{"type":"object","properties":{}}', light, nil))
local run = ffi.new("lash_Run *[1]")
check(lash.lash_run_start(S, "Light the lamps.", nil, run))
-- a frame loop: one budgeted step per frame until the run is idle
local frames, st = 0, 1
while st > 0 do
  st = lash.lash_step(S, 1)
  frames = frames + 1
end
check(st)
local out = ffi.new("const char *[1]")
check(lash.lash_run_result(run[0], out, nil))
print(("lash %s via %s: status %d after %d frames: %s"):format(ffi.string(lash.lash_version()),
  jit.version, lash.lash_run_status(run[0]), frames, out[0] ~= nil and ffi.string(out[0]) or "(none)"))
print("lamps: " .. lamps)
lash.lash_run_free(run[0])
check(lash.lash_close(S))
light:free()
