/*
** pool.h: the `lash` program's allocator for its Lua state: small blocks
** (most of a Lua heap: strings, tables, closures, prototypes) come from
** per-size free lists carved out of large chunks; the rest is malloc's.
** Part of the program only (issue 15's cold start: malloc and free were
** a tenth of a short run, most of it loading lash's bytecode and freeing
** it again at lua_close); the libraries leave the allocator to the host.
*/
#ifndef lash_cli_pool_h
#define lash_cli_pool_h

#include <stddef.h>

#define CLI_POOL_STEP 16                 /* size classes: 16, 32, ... */
#define CLI_POOL_MAX 256                 /* larger blocks: malloc */
#define CLI_POOL_CLASSES (CLI_POOL_MAX / CLI_POOL_STEP)

typedef struct cli_pool_chunk cli_pool_chunk;

typedef struct cli_pool {
  void *free[CLI_POOL_CLASSES];          /* freed blocks of each class */
  cli_pool_chunk *chunks;                /* every chunk, for cli_pool_close */
  char *next, *end;                      /* what is left of the newest chunk */
} cli_pool;

/* A lua_Alloc (lash_Options.alloc); ud is the pool. */
void *cli_pool_alloc(void *ud, void *ptr, size_t osize, size_t nsize);

/* Free every chunk: after the Lua state is closed, never before. */
void cli_pool_close(cli_pool *p);

#endif
