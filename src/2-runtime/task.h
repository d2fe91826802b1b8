/*
** task.h: the scheduler's insides (runtime.c): tasks, futures, the ready
** queue, for its Lua face (ltask.c) and the units that drive the runtime
** (state.c, embed.c). Other bindings use runtime.h.
** Prefixes lash_task_, lash_future_, lash_runtime_ (runtime.c).
*/
#ifndef lash_task_h
#define lash_task_h

#include "runtime.h"

#define LASH_ERROR_MT "lash.error"
#define LASH_TASK_MT "lash.task"
#define LASH_FUTURE_MT "lash.future"
#define LASH_WAITER_MT "lash.future_waiter"


enum {
  LASH_TASK_READY,      /* queued to run */
  LASH_TASK_RUNNING,
  LASH_TASK_WAITING,
  LASH_TASK_DONE        /* finished: see outcome */
};

enum { LASH_OUT_NONE, LASH_OUT_OK, LASH_OUT_ERROR, LASH_OUT_CANCELLED };

typedef struct lash_future lash_future;
typedef struct future_waiter future_waiter;

struct lash_future {
  int state;              /* LASH_OUT_* ; NONE while pending */
  future_waiter *waiters; /* doubly linked */
  int nvalues;
};

struct lash_task {
  lash_runtime *rt;
  lua_State *co;
  lash_future *fut;       /* completion; lives in uservalue 2 */
  lash_wait *wait;        /* what it waits on, if WAITING */
  lash_task *next_ready;
  int status;
  int in_ready;
  int started;
  int cancel_pending;
  int joined;
  int nargs;              /* arguments waiting on co for the first resume */
  unsigned id;
  struct lash_code_budget *budget;  /* the budget.call it is inside (budget.h),
                          ** put in place only while it runs */
};

struct lash_runtime {
  lua_State *L;           /* main thread */
  lash_loop *loop;
  lash_task *ready_head, *ready_tail;
  int ntasks;
  unsigned next_id;
  int tasks_ref;          /* registry table: task userdata -> true while alive */
  int threads_ref;        /* registry table: thread -> task userdata */
  void (*log)(void *ud, int level, const char *msg);
  void *log_ud;
  int log_is_default;     /* stderr: filter debug/info by LASH_LOG */
  int aborting;           /* lash_runtime_abort: every wait fails at once */
};

/* No task is ready and nothing the loop watches (fd, timer, child,
** transfer) could make one ready: tasks still waiting wait forever. */
static inline int lash_runtime_stuck(const lash_runtime *rt) {
  return !rt->ready_head && !lash_loop_alive(rt->loop);
}

/* Futures (runtime.c): a userdata whose uservalue 1 holds its values. */
/* Push a new pending future. */
lash_future *lash_future_new(lua_State *L);
/* Settle the future at idx (state LASH_OUT_*) with the n values on top of
** the stack, popping them, and wake its waiters. */
void lash_future_settle(lua_State *L, int idx, int state, int n);
/* Push a settled future's outcome: its values, or (raise) raise its error;
** with raise == 0, pcall style: true, values... or false, err. */
int  lash_future_push(lua_State *L, int idx, int raise);
/* Wait until the future at fidx settles, then as lash_future_push. Use as
** `return lash_future_wait(...)`. */
int  lash_future_wait(lua_State *L, int fidx, int raise);

/* Push a new task running the function at fidx with the nargs values
** above it, queued to run. */
lash_task *lash_task_spawn(lua_State *L, int fidx, int nargs);
void lash_task_make_ready(lash_task *t);
void lash_task_resume(lash_task *t, lua_State *from);
/* One scheduler step: wait for I/O at most timeout_ms (not at all when
** tasks are ready), dispatch it, resume the tasks that were ready, oldest
** first. deadline (lash_now_ns; 0: none) stops resuming early; the tasks
** left keep their place at the head of the queue. */
int  lash_runtime_step_from(lash_runtime *rt, int timeout_ms, lua_State *from,
                            uint64_t deadline);
int  lash_is_error(lua_State *L, int idx, const char *kind);
/* Cancel every live task and give them a bounded time to unwind. */
void lash_runtime_cancel_all(lash_runtime *rt, int grace_ms);
int  lash_task_cancel(lash_task *t);

#endif
