/*
** embed.h: internals shared by state.c (lash_State: open, attach, close,
** protected calls, stepping) and embed.c (agent specs, host tools, runs,
** approvals and events). Not part of the public API (that is lash.h).
*/
#ifndef lash_embed_h
#define lash_embed_h

#include "lash.h"
#include "lua.h"

/* The allocator's bookkeeping; lives in lash_State so the budget can be
** checked and changed from C at any time. */
typedef struct lash_budget {
  lua_Alloc base;
  void *base_ud;
  size_t used;
  size_t limit;          /* 0: none */
  int exceeded;          /* set when a request was refused */
} lash_budget;

typedef struct lash_handle lash_handle;

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
  /* embed.c */
  lash_EventFn on_event;
  void *event_ud;
  int glue_ref;          /* registry ref of the lash.embed instance, or LUA_NOREF */
  lash_handle *handle;   /* what the glue's C functions see; cleared at close */
  lash_Run *runs;        /* every run the host has not freed */
};

/* state.c */
void lashS_seterr(lash_State *S, const char *fmt, ...);
/* Is S usable by `who`? LASH_OK, or a status with lash_errmsg set. */
int  lashS_check(lash_State *S, const char *who);
/* lua_pcall with a traceback on S->L; a lash.error of kind "arg" becomes
** LASH_EARG with its message alone. Records the message in S->err. */
int  lashS_pcall(lash_State *S, int nargs, int nres);

/* embed.c */
/* Cancel the runs started from C, and (attached) drive them until they
** end or grace_ms pass; then cut the glue from the state. */
void lashE_shutdown(lash_State *S, int grace_ms);
/* After the Lua state is gone (or detached): settle every run the host
** still holds (they stay readable until lash_run_free). */
void lashE_release(lash_State *S);

#endif
