/*
** budget.c: the budget core (prefix lash_budget_): the allocator wrapper
** that holds a state to its heap budget (lash_open), and the budget of a
** piece of untrusted code -- an instruction count and a clock checked by a
** count hook, and net memory checked by a second allocator wrapper -- put
** in place and taken off as its task runs and waits. The Lua face
** (budget.run, budget.call) is lbudget.c.
**
** Once a code budget is spent the hook fires on every instruction and
** raises again, and the allocator keeps refusing, so a pcall loop in the
** code cannot catch its way past it. One code budget is in place at a time
** per Lua state (the allocator wrapper is the state's). Coroutines left
** behind keep the hook; it removes itself the first time it fires with no
** budget in place.
*/
#include "budget.h"
#include "lauxlib.h"
#include "loop.h"

#include <string.h>

static const char CURRENT_KEY = 0;   /* registry: the budget in place */
static const char STRMT_KEY = 0;     /* registry: strings' metatable */
static const char STRIDX_KEY = 0;    /* registry: its own __index */

/* ---- the state's heap budget -------------------------------------------- */

void *lash_budget_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  lash_budget *b = ud;
  size_t old = ptr ? osize : 0;
  void *np;
  /* Growing past the budget fails like an out-of-memory; shrinking and
  ** freeing always succeed, so Lua can always clean up. */
  if (nsize > old && b->limit && b->used - old + nsize > b->limit) {
    b->exceeded = 1;
    return NULL;
  }
  np = b->base(b->base_ud, ptr, osize, nsize);
  if (nsize == 0) {
    b->used -= old;
    return NULL;
  }
  if (!np) return NULL;
  b->used = b->used - old + nsize;
  return np;
}

int lash_budget_memory(lua_State *L, size_t *used, size_t *limit) {
  void *ud = NULL;
  lash_budget *b;
  if (lua_getallocf(L, &ud) != lash_budget_alloc) return 0;
  b = ud;
  *used = b->used;
  *limit = b->limit;
  return 1;
}

/* ---- the budget of a piece of code --------------------------------------- */

static void *code_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  lash_code_budget *b = ud;
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
  } else if (np) {
    b->grown += (ptrdiff_t)nsize - (ptrdiff_t)old;
  }
  /* freeing what others left gives no credit */
  if (b->grown < 0) b->grown = 0;
  return nsize == 0 ? NULL : np;
}

void lash_budget_init(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &STRMT_KEY) != LUA_TNIL) {
    lua_pop(L, 1);
    return;
  }
  lua_pop(L, 1);
  lua_pushliteral(L, "");
  if (lua_getmetatable(L, -1)) {
    lua_getfield(L, -1, "__index");
    lua_rawsetp(L, LUA_REGISTRYINDEX, &STRIDX_KEY);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &STRMT_KEY);
  }
  lua_pop(L, 1);
}

lash_code_budget *lash_budget_current(lua_State *L) {
  lash_code_budget *b;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &CURRENT_KEY);
  b = lua_touserdata(L, -1);
  lua_pop(L, 1);
  return b;
}

void lash_budget_enter(lua_State *L, lash_code_budget *b) {
  if (b->installed) return;
  b->installed = 1;
  b->f = lua_getallocf(L, &b->ud);
  lua_setallocf(L, code_alloc, b);
  lua_pushlightuserdata(L, b);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &CURRENT_KEY);
  b->since = lash_now_ns();
  b->deadline = b->limit_ns
                    ? b->since + (b->limit_ns > b->spent_ns ? b->limit_ns - b->spent_ns : 0) + 1
                    : 0;
  if (b->string_ref != LUA_NOREF) {
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &STRMT_KEY) == LUA_TTABLE) {
      lua_rawgeti(L, LUA_REGISTRYINDEX, b->string_ref);
      lua_setfield(L, -2, "__index");
    }
    lua_pop(L, 1);
  }
}

void lash_budget_leave(lua_State *L, lash_code_budget *b) {
  if (!b->installed) return;
  b->installed = 0;
  lua_setallocf(L, b->f, b->ud);
  lua_pushnil(L);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &CURRENT_KEY);
  b->spent_ns += lash_now_ns() - b->since;
  if (b->string_ref != LUA_NOREF) {
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &STRMT_KEY) == LUA_TTABLE) {
      lua_rawgetp(L, LUA_REGISTRYINDEX, &STRIDX_KEY);
      lua_setfield(L, -2, "__index");
    }
    lua_pop(L, 1);
  }
}

lash_code_budget *lash_budget_suspend(lua_State *L) {
  lash_code_budget *b = lash_budget_current(L);
  if (b) lash_budget_leave(L, b);
  return b;
}

void lash_budget_hook(lua_State *L, lua_Debug *ar) {
  lash_code_budget *b = lash_budget_current(L);
  (void)ar;
  if (!b) {
    lua_sethook(L, NULL, 0, 0);   /* a coroutine that outlived its budget */
    return;
  }
  if (!b->exceeded) {
    b->count += LASH_BUDGET_HOOK_EVERY;
    if (b->max_count && b->count > b->max_count) b->exceeded = "instructions";
    else if (b->deadline && lash_now_ns() > b->deadline) b->exceeded = "time";
  }
  if (b->exceeded) {
    lua_sethook(L, lash_budget_hook, LUA_MASKCOUNT, 1);
    luaL_error(L, "the %s budget is spent", b->exceeded);
  }
}
