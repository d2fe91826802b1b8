/*
** pool.c: the `lash` program's Lua allocator (see pool.h). Lua tells the
** allocator the size of the block it frees or resizes, so a block needs
** no header: its class is its size rounded up to CLI_POOL_STEP. A freed
** small block goes on its class's list and is the next one handed out;
** chunks are only given back when the program closes the pool. Under
** AddressSanitizer every block is malloc's, so it still sees each one.
*/
#include "pool.h"

#include <stdlib.h>
#include <string.h>

#define CHUNK_SIZE (256u << 10)

struct cli_pool_chunk {
  cli_pool_chunk *next;
  /* blocks follow, aligned like malloc's */
  _Alignas(16) char data[];
};

#if defined(__SANITIZE_ADDRESS__)
#define POOLED(n) 0
#else
#define POOLED(n) ((n) <= CLI_POOL_MAX)
#endif

static size_t class_of(size_t n) { return (n + CLI_POOL_STEP - 1) / CLI_POOL_STEP - 1; }

static void *take(cli_pool *p, size_t n) {
  size_t c = class_of(n), size = (c + 1) * CLI_POOL_STEP;
  void *b = p->free[c];
  if (b) {
    memcpy(&p->free[c], b, sizeof(void *));
    return b;
  }
  if ((size_t)(p->end - p->next) < size) {
    cli_pool_chunk *k = malloc(sizeof *k + CHUNK_SIZE);
    if (!k) return NULL;
    k->next = p->chunks;
    p->chunks = k;
    p->next = k->data;
    p->end = k->data + CHUNK_SIZE;
  }
  b = p->next;
  p->next += size;
  return b;
}

static void give(cli_pool *p, void *b, size_t n) {
  size_t c = class_of(n);
  memcpy(b, &p->free[c], sizeof(void *));
  p->free[c] = b;
}

void *cli_pool_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  cli_pool *p = ud;
  void *nb;
  /* ptr == NULL: osize is the kind of object, not a size */
  if (!ptr) osize = 0;
  if (nsize == 0) {
    if (ptr) {
      if (POOLED(osize)) give(p, ptr, osize);
      else free(ptr);
    }
    return NULL;
  }
  if (ptr && !POOLED(osize) && !POOLED(nsize)) return realloc(ptr, nsize);
  if (ptr && POOLED(osize) && POOLED(nsize) && class_of(osize) == class_of(nsize))
    return ptr;
  nb = POOLED(nsize) ? take(p, nsize) : malloc(nsize);
  if (!nb) return NULL;   /* Lua keeps the old block on failure */
  if (ptr) {
    memcpy(nb, ptr, osize < nsize ? osize : nsize);
    if (POOLED(osize)) give(p, ptr, osize);
    else free(ptr);
  }
  return nb;
}

void cli_pool_close(cli_pool *p) {
  while (p->chunks) {
    cli_pool_chunk *k = p->chunks;
    p->chunks = k->next;
    free(k);
  }
  memset(p, 0, sizeof *p);
}
