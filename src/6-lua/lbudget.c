/*
** lbudget.c: lash.core.budget, running Lua code that lash does not trust
** under budgets it cannot bypass: a count of Lua instructions (a hook on
** the thread, inherited by every coroutine created from it), a clock (the
** time the code itself runs, checked by the same hook), and a memory
** budget enforced in the allocator, so one C call (table.concat,
** string.rep, a decoder) cannot grow past it either: the allocation fails
** and Lua raises its memory error.
**
**   ok, res_or_err, exceeded = budget.run(fn, {instructions=, memory=,
**                                              seconds=})
**
** runs fn in a fresh coroutine that must not wait (loading a spec);
** `exceeded` is "instructions", "memory", "time" or nil.
**
**   ... = budget.call(fn, {instructions=, memory=, seconds=, label=,
**                          string_index=}, ...)
**
** calls fn(...) in the running thread (a run's task: the functions an
** untrusted spec defines, at run time) and returns its results; fn may
** wait. While the task waits the budget is set aside -- the scheduler
** takes it off before any other task runs and puts it back when this one
** resumes (lash_budget_enter/leave, budget.h) -- so only fn's own work is
** counted: instructions, the seconds it runs, and the memory it allocates
** net. A spent budget raises a typed error, kind "budget". Inside another
** budget, fn simply runs under that one.
**
** The hook, the clock and the allocator wrapper are the budget core
** (budget.c); this file is their Lua face. Prefix: l_ (static).
*/
#include "lua.h"
#include "lauxlib.h"
#include "budget.h"
#include "laux.h"
#include "modules.h"
#include "runtime.h"
#include "task.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static const char *const run_options[] = {"instructions", "memory", "seconds",
                                          NULL};
static const char *const call_options[] = {"instructions", "memory", "seconds",
                                           "label", "string_index", NULL};

static lua_Integer opt_field(lua_State *L, int t, const char *k) {
  lua_Integer v;
  int isnum;
  lua_getfield(L, t, k);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return 0;
  }
  v = lua_tointegerx(L, -1, &isnum);
  if (!isnum) {
    lua_Number n = lua_tonumberx(L, -1, &isnum);
    if (!isnum || n < 0) luaL_error(L, "budget.run: %s must be a number >= 0", k);
    v = n > 9e15 ? (lua_Integer)9e15 : (lua_Integer)n;
  }
  lua_pop(L, 1);
  if (v < 0) luaL_error(L, "budget.run: %s must be >= 0", k);
  return v;
}

static void close_thread(lua_State *co, lua_State *L) {
#if LUA_VERSION_NUM >= 504 && defined(LUA_VERSION_RELEASE_NUM) && LUA_VERSION_RELEASE_NUM >= 50406
  lua_closethread(co, L);
#else
  (void)L;
  lua_resetthread(co);
#endif
}

/*** Run fn() under budgets.
@function run
@tparam function fn
@tparam table limits `instructions` (count), `memory` (bytes), `seconds`
  (wall clock; fractions allowed); each 0 or absent means unlimited
@treturn boolean ok
@return fn's first result, or the error
@treturn ?string the budget that was spent */
static int l_run(lua_State *L) {
  lash_code_budget *b;
  lua_State *co;
  lua_Number secs;
  int st, nres = 0;
  luaL_checktype(L, 1, LUA_TFUNCTION);
  luaL_checktype(L, 2, LUA_TTABLE);
  lashA_checkoptions(L, 2, "budget.run", run_options);
  if (lash_budget_current(L)) return luaL_error(L, "budget.run: a budget is already running");
  lua_settop(L, 2);
  b = lua_newuserdatauv(L, sizeof *b, 0);        /* 3: lives while we run */
  memset(b, 0, sizeof *b);
  b->string_ref = LUA_NOREF;
  b->loading = 1;
  b->max_count = opt_field(L, 2, "instructions");
  b->memory = (size_t)opt_field(L, 2, "memory");
  lua_getfield(L, 2, "seconds");
  secs = lua_isnil(L, -1) ? 0 : luaL_checknumber(L, -1);
  lua_pop(L, 1);
  if (secs < 0) return luaL_error(L, "budget.run: seconds must be >= 0");
  if (secs > 0) b->limit_ns = (uint64_t)(secs * 1e9);
  co = lua_newthread(L);                          /* 4 */
  lua_pushvalue(L, 1);
  lua_xmove(L, co, 1);
  lua_sethook(co, lash_budget_hook, LUA_MASKCOUNT, LASH_BUDGET_HOOK_EVERY);
  /* Collect first, so garbage from before does not count, then wrap. */
  lua_gc(L, LUA_GCCOLLECT, 0);
  lash_budget_enter(L, b);
  st = lua_resume(co, L, 0, &nres);
  lash_budget_leave(L, b);
  lua_sethook(co, NULL, 0, 0);
  if (st == LUA_OK) {
    lua_pushboolean(L, 1);
    if (nres > 0) {
      lua_pop(co, nres - 1);
      lua_xmove(co, L, 1);
    } else {
      lua_pushnil(L);
    }
    return 2;
  }
  lua_pushboolean(L, 0);
  if (st == LUA_YIELD) {
    lua_pushliteral(L, "the code yielded outside a task; it must return, not wait");
    close_thread(co, L);
    return 2;
  }
  lua_xmove(co, L, 1);
  close_thread(co, L);
  if (st == LUA_ERRMEM && !b->exceeded) b->exceeded = "memory";
  if (b->exceeded) lua_pushstring(L, b->exceeded);
  else lua_pushnil(L);
  /* free what the failed code built now, under the normal allocator */
  lua_gc(L, LUA_GCCOLLECT, 0);
  return 3;
}


/* ---- budget.call ------------------------------------------------------ */

#define CALL_MT "lash.budget.call"

/* fn is over (or its thread was closed under it): everything back. */
static void call_end(lash_code_budget *b) {
  lua_State *T = b->thread;
  if (b->finished) return;
  b->finished = 1;
  lash_budget_leave(T, b);
  lua_sethook(T, b->old_hook, b->old_mask, b->old_count);
  if (b->task && b->task->budget == b) b->task->budget = NULL;
  if (b->string_ref != LUA_NOREF) {
    luaL_unref(T, LUA_REGISTRYINDEX, b->string_ref);
    b->string_ref = LUA_NOREF;
  }
}

static int call_close(lua_State *L) {
  lash_code_budget *b = luaL_checkudata(L, 1, CALL_MT);
  call_end(b);
  return 0;
}

static int call_k(lua_State *L, int status, lua_KContext ctx) {
  lash_code_budget *b = (lash_code_budget *)ctx;
  const char *label;
  call_end(b);
  if (status == LUA_OK || status == LUA_YIELD) return lua_gettop(L) - b->base;
  if (status == LUA_ERRMEM && !b->exceeded) b->exceeded = "memory";
  if (!b->exceeded) return lua_error(L);     /* fn's own error, as it was */
  lua_getiuservalue(L, b->base, 1);
  label = lua_tostring(L, -1);
  if (!label) label = "a function of a spec loaded without --trust";
  if (b->exceeded[0] == 'i')
    return lash_error_raise(L, "budget", "%s ran past its budget of %I Lua "
                            "instructions in one call (an endless loop?); a spec "
                            "loaded without --trust runs under it (--trust lifts "
                            "it)", label, (lua_Integer)b->max_count);
  if (b->exceeded[0] == 'm')
    return lash_error_raise(L, "budget", "%s used more than its budget of %I "
                            "bytes of memory in one call (a runaway "
                            "allocation?); a spec loaded without --trust runs "
                            "under it (--trust lifts it)", label,
                            (lua_Integer)b->memory);
  return lash_error_raise(L, "budget", "%s ran longer than its budget of %f "
                          "s of run time in one call (waiting is not counted); "
                          "a spec loaded without --trust runs under it "
                          "(--trust lifts it)", label,
                          (lua_Number)b->limit_ns / 1e9);
}

static int nested_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  (void)ctx;
  return lua_gettop(L);
}

/*** Call fn(...) under budgets; fn may wait (in a task).
@function call
@tparam function fn
@tparam table limits `instructions`, `memory` (net bytes), `seconds` (run
  time, waits not counted), each 0 or absent for unlimited; `label` names
  fn in the error; `string_index`: strings' __index while fn runs
@return fn's results
@raise kind "budget" when a budget is spent; fn's own errors unchanged */
static int l_call(lua_State *L) {
  lash_code_budget *b;
  lash_task *t;
  lua_Number secs;
  int nargs;
  luaL_checktype(L, 1, LUA_TFUNCTION);
  luaL_checktype(L, 2, LUA_TTABLE);
  lashA_checkoptions(L, 2, "budget.call", call_options);
  if (lash_budget_current(L)) {
    /* already counted: the outer budget holds */
    lua_remove(L, 2);
    lua_callk(L, lua_gettop(L) - 1, LUA_MULTRET, 0, nested_k);
    return lua_gettop(L);
  }
  b = lua_newuserdatauv(L, sizeof *b, 1);
  memset(b, 0, sizeof *b);
  b->string_ref = LUA_NOREF;
  b->finished = 1;                  /* nothing to undo until armed */
  luaL_setmetatable(L, CALL_MT);
  lua_insert(L, 1);                 /* 1 budget, 2 fn, 3 limits, 4.. args */
  b->max_count = opt_field(L, 3, "instructions");
  b->memory = (size_t)opt_field(L, 3, "memory");
  lua_getfield(L, 3, "seconds");
  secs = lua_isnil(L, -1) ? 0 : luaL_checknumber(L, -1);
  lua_pop(L, 1);
  if (secs < 0) return luaL_error(L, "budget.call: seconds must be >= 0");
  b->limit_ns = secs > 0 ? (uint64_t)(secs * 1e9) : 0;
  lua_getfield(L, 3, "label");
  lua_setiuservalue(L, 1, 1);
  if (lua_getfield(L, 3, "string_index") == LUA_TTABLE)
    b->string_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  else
    lua_pop(L, 1);
  lua_remove(L, 3);                 /* 1 budget, 2 fn, 3.. args */
  lua_toclose(L, 1);
  t = lash_task_current(L);
  b->task = t && t->co == L ? t : NULL;
  b->thread = L;
  b->base = 1;
  b->old_hook = lua_gethook(L);
  b->old_mask = lua_gethookmask(L);
  b->old_count = lua_gethookcount(L);
  nargs = lua_gettop(L) - 2;
  b->finished = 0;
  lua_sethook(L, lash_budget_hook, LUA_MASKCOUNT, LASH_BUDGET_HOOK_EVERY);
  if (b->task) b->task->budget = b;
  lash_budget_enter(L, b);
  /* only a task's yields come back through the scheduler, which sets the
  ** budget aside; elsewhere fn must not yield (it would leave the budget in
  ** place for whoever resumed it) */
  if (!b->task)
    return call_k(L, lua_pcall(L, nargs, LUA_MULTRET, 0), (lua_KContext)b);
  return call_k(L, lua_pcallk(L, nargs, LUA_MULTRET, 0, (lua_KContext)b, call_k),
                (lua_KContext)b);
}

/*** Is a budget running (are we inside budget.run or budget.call)? */
static int l_active(lua_State *L) {
  lua_pushboolean(L, lash_budget_current(L) != NULL);
  return 1;
}

/*** Is a spec loading (are we inside budget.run)? */
static int l_loading(lua_State *L) {
  lash_code_budget *b = lash_budget_current(L);
  lua_pushboolean(L, b != NULL && b->loading);
  return 1;
}

int lash_open_budget(lua_State *L) {
  static const luaL_Reg funcs[] = {
    {"run", l_run}, {"call", l_call}, {"active", l_active},
    {"loading", l_loading}, {NULL, NULL}};
  if (luaL_newmetatable(L, CALL_MT)) {
    /* no __gc: a thread collected unclosed goes with it, and by then its
    ** budget is not installed (it is only while the thread runs) */
    lua_pushcfunction(L, call_close);
    lua_setfield(L, -2, "__close");
  }
  lua_pop(L, 1);
  /* strings' metatable and its own __index, restored after each call */
  lash_budget_init(L);
  luaL_newlib(L, funcs);
  return 1;
}
