/*
** lbudget.c: lash.core.budget, running Lua code that lash does not trust
** under budgets it cannot bypass: a count of Lua instructions (a hook on
** the thread, inherited by every coroutine created from it), a wall-clock
** deadline (checked by the same hook), and a memory budget enforced in the
** allocator, so one C call (table.concat, string.rep, a decoder) cannot
** grow past it either: the allocation fails and Lua raises its memory
** error.
**
**   ok, res_or_err, exceeded = budget.run(fn, {instructions=, memory=,
**                                              seconds=})
**
** runs fn in a fresh coroutine; `exceeded` is "instructions", "memory",
** "time" or nil. Once a budget is spent the hook fires on every
** instruction and raises again, so a pcall loop in the code cannot catch
** its way past it. One budget at a time per Lua state (nesting raises):
** the state is one thread, and the allocator wrapper is the state's.
** Coroutines left behind keep the hook; it removes itself the first time it
** fires with no budget running.
*/
#include "lua.h"
#include "lauxlib.h"
#include "modules.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define BUDGET_KEY "lash.budget.current"
#define HOOK_EVERY 1000

typedef struct budget {
  lua_Alloc f;            /* the allocator this budget wraps */
  void *ud;
  ptrdiff_t grown;        /* net bytes allocated since the start */
  size_t memory;          /* 0: unlimited */
  long long count, max_count;  /* 0: unlimited */
  uint64_t deadline;      /* monotonic ns; 0: none */
  const char *exceeded;
} budget;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *budget_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  budget *b = ud;
  size_t old = ptr ? osize : 0;
  void *np;
  if (nsize > old && b->memory &&
      b->grown + (ptrdiff_t)(nsize - old) > (ptrdiff_t)b->memory) {
    if (!b->exceeded) b->exceeded = "memory";
    return NULL;
  }
  np = b->f(b->ud, ptr, osize, nsize);
  if (nsize == 0) {
    b->grown -= (ptrdiff_t)old;
    return NULL;
  }
  if (np) b->grown += (ptrdiff_t)nsize - (ptrdiff_t)old;
  return np;
}

static budget *current(lua_State *L) {
  budget *b;
  lua_getfield(L, LUA_REGISTRYINDEX, BUDGET_KEY);
  b = lua_touserdata(L, -1);
  lua_pop(L, 1);
  return b;
}

static void hook(lua_State *L, lua_Debug *ar) {
  budget *b = current(L);
  (void)ar;
  if (!b) {
    lua_sethook(L, NULL, 0, 0);   /* a coroutine that outlived its budget */
    return;
  }
  if (!b->exceeded) {
    b->count += HOOK_EVERY;
    if (b->max_count && b->count > b->max_count) b->exceeded = "instructions";
    else if (b->deadline && now_ns() > b->deadline) b->exceeded = "time";
  }
  if (b->exceeded) {
    lua_sethook(L, hook, LUA_MASKCOUNT, 1);
    luaL_error(L, "the %s budget is spent", b->exceeded);
  }
}

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
  budget *b;
  lua_State *co;
  lua_Number secs;
  int st, nres = 0;
  luaL_checktype(L, 1, LUA_TFUNCTION);
  luaL_checktype(L, 2, LUA_TTABLE);
  if (current(L)) return luaL_error(L, "budget.run: a budget is already running");
  lua_settop(L, 2);
  b = lua_newuserdatauv(L, sizeof *b, 0);        /* 3: lives while we run */
  memset(b, 0, sizeof *b);
  b->max_count = opt_field(L, 2, "instructions");
  b->memory = (size_t)opt_field(L, 2, "memory");
  lua_getfield(L, 2, "seconds");
  secs = lua_isnil(L, -1) ? 0 : luaL_checknumber(L, -1);
  lua_pop(L, 1);
  if (secs < 0) return luaL_error(L, "budget.run: seconds must be >= 0");
  if (secs > 0) b->deadline = now_ns() + (uint64_t)(secs * 1e9);
  co = lua_newthread(L);                          /* 4 */
  lua_pushvalue(L, 1);
  lua_xmove(L, co, 1);
  lua_sethook(co, hook, LUA_MASKCOUNT, HOOK_EVERY);
  /* Collect first, so garbage from before does not count, then wrap. */
  lua_gc(L, LUA_GCCOLLECT, 0);
  lua_pushvalue(L, 3);
  lua_setfield(L, LUA_REGISTRYINDEX, BUDGET_KEY);
  b->f = lua_getallocf(L, &b->ud);
  lua_setallocf(L, budget_alloc, b);
  st = lua_resume(co, L, 0, &nres);
  lua_setallocf(L, b->f, b->ud);
  lua_pushnil(L);
  lua_setfield(L, LUA_REGISTRYINDEX, BUDGET_KEY);
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

/*** Is a budget running (are we inside budget.run)? */
static int l_active(lua_State *L) {
  lua_pushboolean(L, current(L) != NULL);
  return 1;
}

int lash_open_budget(lua_State *L) {
  static const luaL_Reg funcs[] = {
    {"run", l_run}, {"active", l_active}, {NULL, NULL}};
  luaL_newlib(L, funcs);
  return 1;
}
