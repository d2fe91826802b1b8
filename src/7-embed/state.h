/*
** state.h: lash_State, the state half of lash.h (state.c, prefix lashS_):
** open, attach, close, protected calls, stepping. Not part of the public
** API (that is lash.h). What the units above it (embed.c) keep on a state
** they hang off ext and let go through the hooks they register: the state
** never calls up into them.
*/
#ifndef lash_state_h
#define lash_state_h

#include "lash.h"
#include "lua.h"
#include "budget.h"

/* How lash_close lets an upper unit's data on the state go. shutdown runs
** while the Lua state still works (grace_ms > 0: attached, let what it
** started unwind that long); release runs after the Lua state is gone or
** detached and frees ext. */
typedef struct lashS_hooks {
  void (*shutdown)(lash_State *S, int grace_ms);
  void (*release)(lash_State *S);
} lashS_hooks;

struct lash_State {
  lua_State *L;          /* the main thread */
  lash_budget mem;       /* unused when attached (the host's allocator rules) */
  char err[2048];
  void (*log)(void *ud, int level, const char *msg);
  void *log_ud;
  int failed;            /* status of a failed open/attach: every call returns it */
  /* attached: the runtime's log before ours, put back at close */
  void (*prev_log)(void *ud, int level, const char *msg);
  void *prev_log_ud;
  int prev_log_is_default;
  int attached;          /* L belongs to the host (lash_attach) */
  int depth;             /* host callbacks running right now */
  int closing;           /* inside lash_close: no more callbacks */
  /* the frame-budgeted collector (state.c) */
  size_t gc_owed;        /* bytes allocated in budgeted steps, not yet paid */
  size_t gc_threshold;   /* after a cycle: no new one below this heap size */
  int gc_paused;         /* a cycle ended and the next has not begun */
  double gc_ns_per_step; /* what one basic step costs, on average */
  size_t gc_step;        /* bytes of allocation one basic step pays for */
  /* the embedding API's runs and glue (embed.c), NULL until first used */
  void *ext;
  const lashS_hooks *ext_hooks;
};

void lashS_seterr(lash_State *S, const char *fmt, ...);
/* Is S usable by `who`? LASH_OK, or a status with lash_errmsg set. */
int  lashS_check(lash_State *S, const char *who);
/* lua_pcall with a traceback on S->L; a lash.error of kind "arg" becomes
** LASH_EARG with its message alone. Records the message in S->err. */
int  lashS_pcall(lash_State *S, int nargs, int nres);

#endif
