/*
** outq.h: a bounded queue of a command's output chunks between the loop
** and a Lua task (outq.c, prefix lash_outq_). A backend's reads push into
** it from loop callbacks (lash_outq_sink is a lash_sb_output_fn); a task
** takes the bytes with lash.core.outq's q:next(), which waits while the
** queue is empty. What does not fit in max_bytes is dropped and counted,
** never kept: a command that writes faster than its reader keeps memory
** bounded. The Lua face (methods, waiting) is src/6-lua/loutq.c.
*/
#ifndef lash_outq_h
#define lash_outq_h

#include <stddef.h>
#include <stdint.h>

#include "lua.h"
#include "runtime.h"

#define LASH_OUTQ_MT "lash.outq"
#define LASH_OUTQ_DEFAULT_MAX (1u << 20)

typedef struct lash_outq_chunk lash_outq_chunk;
typedef struct lash_outq lash_outq;

/* A task waiting in next(): a userdata on its stack. */
typedef struct lash_outq_waiter {
  lash_wait w;
  lash_outq *q;                 /* NULL once woken or cancelled */
} lash_outq_waiter;

struct lash_outq {
  lash_outq_chunk *head, *tail;
  size_t bytes;                 /* queued */
  size_t max_bytes;             /* queued at most; more is dropped */
  uint64_t dropped[2];          /* per stream (stdout, stderr), dropped since
                                ** its last chunk kept (that chunk's next
                                ** tells it) */
  uint64_t total[2];            /* every byte pushed, dropped or not */
  int closed;                   /* no more pushes; next() drains then ends */
  int dead;                     /* collected: pushes are ignored */
  lash_outq_waiter *waiter;     /* a task in next(), or NULL */
};

/* A queue's memory is its userdata's (LASH_OUTQ_MT). */
void lash_outq_init(lash_outq *q, size_t max_bytes);
/* stream: 1 stdout, 2 stderr (lash_sb's). Copies; wakes a waiter. */
void lash_outq_push(lash_outq *q, int stream, const char *p, size_t n);
/* The same, with the signature of a sandbox exec request's on_output. */
void lash_outq_sink(void *ud, int stream, const char *p, size_t n);
/* No more pushes; a waiter wakes to drain. Idempotent. */
void lash_outq_close(lash_outq *q);
/* Free what is queued; later pushes are ignored (its __gc). */
void lash_outq_free(lash_outq *q);
/* The queue at idx when it is one, else NULL. */
lash_outq *lash_outq_test(lua_State *L, int idx);

/* For the binding: wake the waiter, if any. */
void lash_outq_wake(lash_outq *q);
/* Take up to max bytes of the first chunk's stream (consecutive chunks of
** one stream are joined, up to a gap) into buf (at least max bytes);
** returns the stream (0: empty) and sets *n and *skipped (the bytes of
** that stream dropped right before these). */
int lash_outq_take(lash_outq *q, char *buf, size_t max, size_t *n,
                   uint64_t *skipped);

#endif
