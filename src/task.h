/*
** task.h: internals shared by runtime.c (scheduler) and ltask.c (the Lua
** face of tasks, futures and sleep). Not for bindings: they use runtime.h.
*/
#ifndef lash_task_h
#define lash_task_h

#include "runtime.h"

#define LASH_ERROR_MT "lash.error"
#define LASH_TASK_MT "lash.task"
#define LASH_FUTURE_MT "lash.future"


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
  void *budget;           /* lbudget.c: the budget.call it is inside, put
                          ** in place only while it runs */
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

/* lbudget.c: a budget follows its task. enter/leave put b in place and
** take it off (idempotent, raise nothing); suspend takes off whatever
** budget is in place and returns it (NULL if none). */
void  lash_budget_enter(lua_State *L, void *b);
void  lash_budget_leave(lua_State *L, void *b);
void *lash_budget_suspend(lua_State *L);

#endif
