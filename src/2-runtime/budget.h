/*
** budget.h: the budgets lash enforces inside a Lua state (budget.c, prefix
** lash_budget_): the state's heap budget (lash_open's allocator wrapper)
** and the budget of one piece of untrusted code (instructions, run time,
** net memory), which lash.core.budget (lbudget.c) runs code under and the
** scheduler (runtime.c) sets aside while its task waits.
*/
#ifndef lash_budget_h
#define lash_budget_h

#include "lua.h"

#include <stddef.h>
#include <stdint.h>

/* ---- the state's heap budget -------------------------------------------- */

/* The allocator's bookkeeping; lash_State keeps one so the budget can be
** checked and changed from C at any time. */
typedef struct lash_budget {
  lua_Alloc base;
  void *base_ud;
  size_t used;
  size_t limit;          /* 0: none */
  int exceeded;          /* set when a request was refused */
} lash_budget;

/* The lua_Alloc that enforces a lash_budget (its ud). */
void *lash_budget_alloc(void *ud, void *ptr, size_t osize, size_t nsize);
/* The heap budget of L's allocator: fills used and limit (0 = none) and
** returns 1, or returns 0 for another allocator. */
int lash_budget_memory(lua_State *L, size_t *used, size_t *limit);

/* ---- the budget of a piece of code --------------------------------------- */

#define LASH_BUDGET_HOOK_EVERY 1000   /* instructions between hook calls */

typedef struct lash_code_budget {
  lua_Alloc f;            /* the allocator this budget wraps, while installed */
  void *ud;
  ptrdiff_t grown;        /* net bytes allocated while installed, >= 0 */
  size_t memory;          /* 0: unlimited */
  long long count, max_count;  /* 0: unlimited */
  uint64_t limit_ns;      /* 0: no clock */
  uint64_t spent_ns;      /* run time of earlier stretches */
  uint64_t since;         /* when the current stretch began */
  uint64_t deadline;      /* of the current stretch; 0: none */
  const char *exceeded;   /* "instructions", "memory", "time" or NULL */
  int installed;
  int loading;            /* a budget.run (a spec loading), not a call */
  int finished;           /* call: fn returned or failed */
  int string_ref;         /* call: strings' __index while installed */
  struct lash_task *task; /* call: the task it belongs to, or NULL */
  lua_State *thread;      /* call: the thread fn runs in */
  lua_Hook old_hook;      /* call: the thread's hook before */
  int old_mask, old_count;
  int base;               /* call: fn's results start above this slot */
} lash_code_budget;

/* Remember strings' metatable and own __index, which an installed budget
** with a string_ref swaps (once per state, before any budget runs). */
void lash_budget_init(lua_State *L);
/* The budget in place on L's state, or NULL. */
lash_code_budget *lash_budget_current(lua_State *L);
/* Put b in place (its allocator wrapper, its clock, strings' __index) and
** take it off again. Idempotent; raise nothing. */
void lash_budget_enter(lua_State *L, lash_code_budget *b);
void lash_budget_leave(lua_State *L, lash_code_budget *b);
/* Take off whatever budget is in place and return it (NULL if none). */
lash_code_budget *lash_budget_suspend(lua_State *L);
/* The count hook that charges instructions and the clock to the budget in
** place (set it with LASH_BUDGET_HOOK_EVERY); raises once one is spent. */
void lash_budget_hook(lua_State *L, lua_Debug *ar);

#endif
