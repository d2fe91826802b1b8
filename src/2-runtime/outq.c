/*
** outq.c: the output queue of outq.h: chunks in a list, bounded by bytes,
** pushed from loop callbacks and taken by one waiting task.
*/
#include "outq.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

struct lash_outq_chunk {
  lash_outq_chunk *next;
  int stream;
  uint64_t skipped;             /* bytes of its stream dropped before it */
  size_t len, off;
  char data[];
};

void lash_outq_init(lash_outq *q, size_t max_bytes) {
  memset(q, 0, sizeof *q);
  q->max_bytes = max_bytes ? max_bytes : LASH_OUTQ_DEFAULT_MAX;
}

void lash_outq_wake(lash_outq *q) {
  lash_outq_waiter *w = q->waiter;
  if (!w) return;
  q->waiter = NULL;
  w->q = NULL;
  lash_wait_done(&w->w);
}

static int append(lash_outq *q, int s, const char *p, size_t n) {
  lash_outq_chunk *c = malloc(sizeof *c + n);
  if (!c) return -1;
  c->next = NULL;
  c->stream = s + 1;
  c->skipped = q->dropped[s];
  c->len = n;
  c->off = 0;
  if (n) memcpy(c->data, p, n);
  q->dropped[s] = 0;
  if (q->tail) q->tail->next = c; else q->head = c;
  q->tail = c;
  q->bytes += n;
  lash_outq_wake(q);
  return 0;
}

void lash_outq_push(lash_outq *q, int stream, const char *p, size_t n) {
  int s = stream == 2 ? 1 : 0;
  size_t room, keep;
  if (!q || q->dead || q->closed || n == 0) return;
  q->total[s] += n;
  room = q->bytes < q->max_bytes ? q->max_bytes - q->bytes : 0;
  keep = n < room ? n : room;
  /* the newest bytes go, and the next chunk kept says how many */
  if (keep && append(q, s, p, keep) < 0) keep = 0;
  q->dropped[s] += n - keep;
}

void lash_outq_sink(void *ud, int stream, const char *p, size_t n) {
  lash_outq_push(ud, stream, p, n);
}

void lash_outq_close(lash_outq *q) {
  int s;
  if (q->closed) return;
  /* what was dropped at the end is told too: an empty chunk carries it */
  for (s = 0; s < 2; s++)
    if (q->dropped[s] && !q->dead) append(q, s, NULL, 0);
  q->closed = 1;
  lash_outq_wake(q);
}

void lash_outq_free(lash_outq *q) {
  lash_outq_chunk *c = q->head;
  while (c) {
    lash_outq_chunk *next = c->next;
    free(c);
    c = next;
  }
  q->head = q->tail = NULL;
  q->bytes = 0;
  q->closed = q->dead = 1;
  lash_outq_wake(q);
}

lash_outq *lash_outq_test(lua_State *L, int idx) {
  return luaL_testudata(L, idx, LASH_OUTQ_MT);
}

int lash_outq_take(lash_outq *q, char *buf, size_t max, size_t *n,
                   uint64_t *skipped) {
  int stream, first = 1;
  *n = 0;
  *skipped = 0;
  if (!q->head) return 0;
  stream = q->head->stream;
  *skipped = q->head->skipped;
  /* one stream's consecutive chunks, up to a gap (told with the next) */
  while (q->head && q->head->stream == stream && *n < max &&
         (first || q->head->skipped == 0)) {
    lash_outq_chunk *c = q->head;
    size_t k = c->len - c->off;
    if (k > max - *n) k = max - *n;
    memcpy(buf + *n, c->data + c->off, k);
    *n += k;
    c->off += k;
    c->skipped = 0;
    first = 0;
    q->bytes -= k;
    if (c->off == c->len) {
      q->head = c->next;
      if (!q->head) q->tail = NULL;
      free(c);
    }
  }
  return stream;
}
