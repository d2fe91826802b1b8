--- lash_ffi: lash's C API (lash.h) for LuaJIT hosts, through the FFI.
--
-- LuaJIT engines (LÖVE, Neovim, ...) load the self-contained liblash with
-- `ffi.load` and drive it from their own frame loop or event loop: lash's
-- Lua 5.4 lives hidden inside the library, next to the engine's LuaJIT.
--
--   local lash = require "lash_ffi"
--   local S = lash.open { lib = "/path/to/liblash.so" }
--   S:load_spec_file("agent.lua")
--   S:register_tool("walk_to", "Walk somewhere.", schema_json, function(call, args) ... end)
--   S:on_event(function(run, event_json) ... end)
--   local run = S:run_start("Find the chest.")
--   -- each frame:  S:step(1)          (about 1 ms of agent work)
--   -- at the end:  run:free(); S:close()
--
-- Callbacks (tools, events) run inside S:step. LuaJIT forbids calling back
-- into Lua from an FFI call made by a compiled trace, so every function here
-- that calls into lash runs interpreted (jit.off); an error a callback
-- raises is caught (it must not unwind through C) and raised again by the
-- S:step that delivered it.
--
-- The declarations below are lash.h's, verbatim but for LASH_API and the
-- comments; tests/integration/test_love.sh checks they match the header.
local ffi = require "ffi"

ffi.cdef [[
typedef struct lash_State lash_State;
typedef struct lash_Run lash_Run;
typedef struct lash_Call lash_Call;
typedef void *(*lash_Alloc)(void *ud, void *ptr, size_t osize, size_t nsize);
typedef struct lash_Options {
  size_t memory_limit;
  lash_Alloc alloc;
  void *alloc_ud;
  const char *lua_dir;
  const char *state_root;
  void (*log)(void *ud, int level, const char *msg);
  void *log_ud;
} lash_Options;
void lash_options_init(lash_Options *opts);
lash_State *lash_open(const lash_Options *opts);
int lash_close(lash_State *S);
int lash_dostring(lash_State *S, const char *code, const char *chunkname);
int lash_dofile(lash_State *S, const char *path);
const char *lash_errmsg(lash_State *S);
size_t lash_memory_used(lash_State *S);
int lash_set_memory_limit(lash_State *S, size_t limit);
const char *lash_version(void);
int lash_step(lash_State *S, int budget_ms);
int lash_run(lash_State *S);
int lash_fd(lash_State *S);
int lash_load_spec_file(lash_State *S, const char *path);
int lash_load_spec_string(lash_State *S, const char *text, const char *name);
int lash_load_spec_string_safe(lash_State *S, const char *text, const char *name);
int lash_set_value(lash_State *S, const char *key, const char *value);
typedef void (*lash_ToolFn)(lash_Call *call, const char *args_json, void *ud);
int lash_register_tool(lash_State *S, const char *name, const char *description, const char *json_schema, lash_ToolFn fn, void *ud);
int lash_register_tool_ex(lash_State *S, const char *name, const char *description, const char *json_schema, unsigned flags, lash_ToolFn fn, void *ud);
int lash_unregister_tool(lash_State *S, const char *name);
int lash_call_return(lash_Call *call, const char *text);
int lash_call_retry(lash_Call *call, const char *message);
int lash_call_fail(lash_Call *call, const char *message);
int lash_call_status(const lash_Call *call);
const char *lash_call_id(const lash_Call *call);
const char *lash_call_name(const lash_Call *call);
const char *lash_call_args(const lash_Call *call);
lash_Run *lash_call_run(const lash_Call *call);
typedef void (*lash_HookFn)(lash_Call *call, const char *payload_json, void *ud);
int lash_register_hook(lash_State *S, const char *hook, lash_HookFn fn, void *ud);
typedef void (*lash_EventFn)(lash_Run *run, const char *event_json, void *ud);
int lash_set_event_handler(lash_State *S, lash_EventFn fn, void *ud);
int lash_run_start(lash_State *S, const char *prompt, const char *options_json, lash_Run **run);
int lash_run_status(const lash_Run *run);
int lash_run_result(const lash_Run *run, const char **output, const char **result_json);
int lash_run_cancel(lash_Run *run);
int lash_run_approve(lash_Run *run, const char *call_id, int allow, const char *message);
int lash_run_free(lash_Run *run);
]]

local M = {
  OK = 0, ERUN = -1, EMEM = -2, EARG = -3, ESYS = -4, EGONE = -5, EBUSY = -6,
  RUN_RUNNING = 0, RUN_APPROVAL = 1, RUN_DONE = 2, RUN_FAILED = 3, RUN_CANCELLED = 4,
  CALL_PENDING = 0, CALL_ANSWERED = 1, CALL_CANCELLED = 2,
  TOOL_REQUIRES_APPROVAL = 1,
  LOG_DEBUG = 0, LOG_INFO = 1, LOG_WARN = 2, LOG_ERROR = 3,
}
M.RUN_STATUS = { [0] = "running", "approval", "done", "failed", "cancelled" }

local State, Run, Call = {}, {}, {}
State.__index, Run.__index, Call.__index = State, Run, Call

local function str(p) return p ~= nil and ffi.string(p) or nil end

--- Load liblash (once per path) and return the FFI library namespace.
-- path: the library file; default $LASH_LIB, else "liblash.so.0" from the
-- linker's search path.
function M.load(path)
  path = path or os.getenv("LASH_LIB") or "liblash.so.0"
  M.libs = M.libs or {}
  if not M.libs[path] then M.libs[path] = ffi.load(path) end
  return M.libs[path]
end

local function check(S, rc, what)
  if rc < 0 then error(what .. ": " .. ffi.string(S.lib.lash_errmsg(S.ptr)), 3) end
  return rc
end

--- Open a state. opts: lib (the library path), memory_limit, lua_dir,
-- state_root. Raises if lash could not open.
function M.open(opts)
  opts = opts or {}
  local lib = M.load(opts.lib)
  local o = ffi.new("lash_Options")
  lib.lash_options_init(o)
  -- keep the strings alive as long as the call that reads them
  o.memory_limit = opts.memory_limit or 0
  if opts.lua_dir then o.lua_dir = opts.lua_dir end
  if opts.state_root then o.state_root = opts.state_root end
  local ptr = lib.lash_open(o)
  if ptr == nil then error("lash_open: out of memory", 2) end
  local S = setmetatable({ lib = lib, ptr = ptr, callbacks = {}, pending_error = nil }, State)
  if lib.lash_dostring(ptr, "return", "=open") ~= 0 then
    local msg = ffi.string(lib.lash_errmsg(ptr))
    lib.lash_close(ptr)
    error("lash_open: " .. msg, 2)
  end
  return S
end

function M.version(lib_path)
  return ffi.string(M.load(lib_path).lash_version())
end

-- A callback's error must not unwind through lash's C frames: keep the
-- first one and raise it from the step that delivered it.
local function guard(S, fn)
  return function(...)
    local ok, err = xpcall(fn, debug.traceback, ...)
    if not ok and not S.pending_error then S.pending_error = err end
  end
end

function State:errmsg() return ffi.string(self.lib.lash_errmsg(self.ptr)) end
function State:dostring(code, name) return check(self, self.lib.lash_dostring(self.ptr, code, name), "lash_dostring") end
function State:load_spec_file(path) return check(self, self.lib.lash_load_spec_file(self.ptr, path), "lash_load_spec_file") end
function State:load_spec_string(text, name) return check(self, self.lib.lash_load_spec_string(self.ptr, text, name), "lash_load_spec_string") end
function State:load_spec_string_safe(text, name)
  return check(self, self.lib.lash_load_spec_string_safe(self.ptr, text, name), "lash_load_spec_string_safe")
end
function State:set_value(k, v) return check(self, self.lib.lash_set_value(self.ptr, k, v), "lash_set_value") end
function State:memory_used() return tonumber(self.lib.lash_memory_used(self.ptr)) end
function State:fd() return check(self, self.lib.lash_fd(self.ptr), "lash_fd") end

--- Offer fn(call, args_json) as a tool. The call object answers now or on
-- any later frame: call:return_(text), call:retry(msg), call:fail(msg).
function State:register_tool(name, description, schema_json, fn, flags)
  local cb = ffi.cast("lash_ToolFn", guard(self, function(call, args)
    fn(setmetatable({ S = self, ptr = call }, Call), ffi.string(args))
  end))
  self.callbacks[#self.callbacks + 1] = cb
  return check(self, self.lib.lash_register_tool_ex(self.ptr, name, description, schema_json, flags or 0, cb, nil),
    "lash_register_tool")
end

--- Receive every event as fn(run_ptr, event_json). One handler per state.
function State:on_event(fn)
  local cb = ffi.cast("lash_EventFn", guard(self, function(run, json) fn(run, ffi.string(json)) end))
  self.callbacks[#self.callbacks + 1] = cb
  return check(self, self.lib.lash_set_event_handler(self.ptr, cb, nil), "lash_set_event_handler")
end

--- Start a run; options_json as lash_run_start's. Returns a Run.
function State:run_start(prompt, options_json)
  local out = ffi.new("lash_Run *[1]")
  check(self, self.lib.lash_run_start(self.ptr, prompt, options_json, out), "lash_run_start")
  return setmetatable({ S = self, ptr = out[0] }, Run)
end

--- Advance every run for at most budget_ms (0 polls, -1 blocks). Returns
-- true while work remains. Raises a callback's error.
function State:step(budget_ms)
  local rc = self.lib.lash_step(self.ptr, budget_ms or 0)
  local err = self.pending_error
  if err then self.pending_error = nil; error(err, 2) end
  return check(self, rc, "lash_step") == 1
end

function State:run_all()
  local rc = self.lib.lash_run(self.ptr)
  local err = self.pending_error
  if err then self.pending_error = nil; error(err, 2) end
  return check(self, rc, "lash_run")
end

--- Close the state: cancels runs still going, frees everything but the
-- runs, which stay readable (status, result) until run:free(), as in C.
-- Idempotent.
function State:close()
  if not self.ptr then return end
  self.lib.lash_close(self.ptr)
  self.ptr = nil
  -- lash calls no callback after close: the trampolines can go
  for _, cb in ipairs(self.callbacks) do cb:free() end
  self.callbacks = {}
end

function Run:status() return self.ptr and self.S.lib.lash_run_status(self.ptr) or M.EGONE end
function Run:status_name() return M.RUN_STATUS[self:status()] or tostring(self:status()) end
function Run:done() return self:status() >= M.RUN_DONE end
--- output, result_json once the run ended (nil, nil before).
function Run:result()
  local out, res = ffi.new("const char *[1]"), ffi.new("const char *[1]")
  if not self.ptr or self.S.lib.lash_run_result(self.ptr, out, res) ~= 0 then return nil, nil end
  return str(out[0]), str(res[0])
end
function Run:cancel() return self.ptr and self.S.lib.lash_run_cancel(self.ptr) end
function Run:approve(call_id, allow, message)
  return self.S.lib.lash_run_approve(self.ptr, call_id, allow and 1 or 0, message)
end
function Run:free()
  if self.ptr then self.S.lib.lash_run_free(self.ptr); self.ptr = nil end
end

function Call:status() return self.S.lib.lash_call_status(self.ptr) end
function Call:pending() return self:status() == M.CALL_PENDING end
function Call:id() return ffi.string(self.S.lib.lash_call_id(self.ptr)) end
function Call:name() return ffi.string(self.S.lib.lash_call_name(self.ptr)) end
function Call:return_(text) return self.S.lib.lash_call_return(self.ptr, text) end
function Call:retry(message) return self.S.lib.lash_call_retry(self.ptr, message) end
function Call:fail(message) return self.S.lib.lash_call_fail(self.ptr, message) end

-- Everything that calls into lash stays interpreted (see the top).
for _, t in ipairs { M, State, Run, Call } do
  for _, f in pairs(t) do
    if type(f) == "function" then jit.off(f, true) end
  end
end
jit.off(guard, true)

return M
