/*
** runtime.h: the per-lua_State lash runtime (internal API): the loop, the
** task scheduler, the one-shot waits that C bindings yield on, and typed
** error objects.
**
** How a C binding waits (the cosocket pattern):
**
**   typedef struct { lash_wait w; lash_timer t; ... } sleep_op;  // userdata
**
**   static int sleep_k(lua_State *L, int status, lua_KContext ctx) {
**     sleep_op *op = (sleep_op *)ctx;
**     lash_wait_check(L, &op->w);      // raises `cancelled` if cancelled
**     return 0;                        // or push results from op
**   }
**   static int l_sleep(lua_State *L) {
**     sleep_op *op = lua_newuserdatauv(L, sizeof *op, 0);  // stays on stack
**     ... luaL_setmetatable(L, "lash.sleep_op") (its __gc stops the timer)
**     lash_wait_init(&op->w, sleep_cancel);
**     lash_timer_start(lash_runtime_loop(L), &op->t, ns, on_timer, op);
**     return lash_wait_yield(L, &op->w, (lua_KContext)op, sleep_k);
**   }
**   static void on_timer(lash_loop *lp, lash_timer *t) {
**     sleep_op *op = t->data; lash_wait_done(&op->w);
**   }
**
** Inside a task, lash_wait_yield yields the coroutine and the scheduler
** resumes it (calling k) after lash_wait_done. Outside a task (a plain
** script, the main thread, a coroutine lash does not manage) it drives the
** loop -- running every other task too -- until the wait is done, then
** calls k directly. Either way k runs exactly once.
**
** The op must stay alive while waiting: keep it as a userdata on the
** waiting thread's stack (that is what anchors it) and give it a __gc that
** stops its I/O, because a state closed with tasks in flight collects ops
** that never completed.
** Prefix lash_ by concern: lash_runtime_, lash_task_, lash_wait_,
** lash_error_ (runtime.c).
*/
#ifndef lash_runtime_h
#define lash_runtime_h

#include "lua.h"
#include "lauxlib.h"
#include "loop.h"

typedef struct lash_runtime lash_runtime;
typedef struct lash_task lash_task;
typedef struct lash_wait lash_wait;

struct lash_wait {
  lash_task *task;               /* waiting task, NULL when driven in place */
  lash_runtime *rt;
  int done;
  int cancelled;                 /* set when the wait ended by cancellation */
  void (*cancel)(lash_wait *w);  /* stop the I/O behind this wait; may be NULL */
};

/* ---- runtime -------------------------------------------------------- */

/* The runtime of L (created by luaopen_lash_core). Raises if missing. */
lash_runtime *lash_runtime_get(lua_State *L);
lash_loop *lash_runtime_loop(lua_State *L);
/* The runtime of L, or NULL if none is open (raises nothing). */
lash_runtime *lash_runtime_find(lua_State *L);
/* Create the runtime for L (idempotent) and return it. */
lash_runtime *lash_runtime_open(lua_State *L);

/* Advance: wait at most timeout_ms for I/O, dispatch it, then resume every
** task that became ready (each runs until its next wait). Returns 1 while
** tasks or I/O remain, 0 when idle, -1 on a loop failure. */
int lash_runtime_step(lash_runtime *rt, int timeout_ms);
/* Run until no task is alive. */
int lash_runtime_run(lash_runtime *rt);
/* Number of tasks not yet finished. */
int lash_runtime_ntasks(lash_runtime *rt);
/* Cancel every live task (each one's current or next wait raises
** `cancelled`, once, so cleanup can still wait); returns at once. */
void lash_runtime_cancel_tasks(lash_runtime *rt);
/* Stop waiting altogether: cancel every task, and from now on every wait,
** in a task or driven in place, raises `cancelled` as soon as it starts,
** so what is left of the cleanup unwinds without waiting. For a host that
** is about to exit (the CLI's second signal); there is no way back. */
void lash_runtime_abort(lash_runtime *rt);
int  lash_runtime_aborting(const lash_runtime *rt);

/* Diagnostics through the host's log hook (lash_Options.log; stderr by
** default). Levels are lash.h's LASH_LOG_*. */
#ifndef LASH_LOG_DEBUG   /* the same values as lash.h */
#define LASH_LOG_DEBUG 0
#define LASH_LOG_INFO 1
#define LASH_LOG_WARN 2
#define LASH_LOG_ERROR 3
#endif
void lash_runtime_log(lash_runtime *rt, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- waits ---------------------------------------------------------- */

void lash_wait_init(lash_wait *w, void (*cancel)(lash_wait *w));
/* Wait for w (see the top of this file). Use as `return lash_wait_yield(...)`. */
int  lash_wait_yield(lua_State *L, lash_wait *w, lua_KContext ctx,
                     lua_KFunction k);
/* Mark w complete and make its task ready. Safe from any loop callback;
** idempotent. */
void lash_wait_done(lash_wait *w);
/* In a continuation: raise the `cancelled` error if the wait was cancelled. */
void lash_wait_check(lua_State *L, lash_wait *w);
/* The task running on L, or NULL. */
lash_task *lash_task_current(lua_State *L);

/* ---- typed errors ---------------------------------------------------- */
/* An error object is a table {kind=, message=, retryable=, ...} with the
** metatable "lash.error" (__tostring gives "kind: message"). */

/* Push a new error object (extra fields may be set on it afterwards). */
void lash_error_push(lua_State *L, const char *kind, const char *message,
                     int retryable);
/* Push and raise. Never returns. */
int  lash_error_raise(lua_State *L, const char *kind, const char *fmt, ...);
/* Push the conventional failure triple nil, message, kind; returns 3. */
int  lash_error_result(lua_State *L, const char *kind, const char *fmt, ...);

#endif
