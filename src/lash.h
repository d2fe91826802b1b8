/*
** lash.h: the public C API of lash, an embeddable Lua-scriptable agent
** harness. Small and stable; every type is opaque.
**
** Threading: a lash_State belongs to one thread. Use one state per thread;
** never call into the same state from two threads. lash starts no threads.
**
** Errors: calls return LASH_OK (0) or a negative LASH_E* status; after a
** failure lash_errmsg(S) says why (valid until the next call on S). No call
** exits or aborts the process.
*/
#ifndef lash_h
#define lash_h

#include <stddef.h>

#include "lua.h"

#define LASH_VERSION_STRING "0.1.0"

#define LASH_OK 0
#define LASH_ERUN -1     /* a Lua error (message in lash_errmsg) */
#define LASH_EMEM -2     /* the memory budget was exceeded or malloc failed */
#define LASH_EARG -3     /* misuse: NULL handle, bad argument, wrong state */
#define LASH_ESYS -4     /* the operating system refused (epoll, ...) */

typedef struct lash_State lash_State;

/* Log levels passed to lash_Options.log. */
#define LASH_LOG_DEBUG 0
#define LASH_LOG_INFO 1
#define LASH_LOG_WARN 2
#define LASH_LOG_ERROR 3

typedef struct lash_Options {
  /* Upper bound on the Lua heap in bytes; 0 means unlimited. */
  size_t memory_limit;
  /* Allocator for the Lua state; NULL means realloc/free. */
  lua_Alloc alloc;
  void *alloc_ud;
  /* Where lash's Lua modules live; NULL means: next to the executable,
  ** then the installed prefix, then the source tree it was built from. */
  const char *lua_dir;
  /* Root directory for local sandboxes; NULL means the default
  ** ($XDG_STATE_HOME/lash/sandboxes). */
  const char *state_root;
  /* Receives warnings and diagnostics; NULL means stderr. */
  void (*log)(void *ud, int level, const char *msg);
  void *log_ud;
} lash_Options;

/* Fill opts with the defaults. */
void lash_options_init(lash_Options *opts);

/* Open a state (opts may be NULL). Returns NULL only when memory for the
** state itself cannot be had. Check lash_errmsg for other failures. */
lash_State *lash_open(const lash_Options *opts);
/* Cancel every task still running, give them a bounded time to clean up
** (sandboxes are destroyed), then free everything. NULL is a no-op. */
void lash_close(lash_State *S);

/* The state's Lua state, for hosts that want to push their own values. */
lua_State *lash_lua(lash_State *S);

/* Run Lua code or a file in the state (protected, with a traceback). */
int lash_dostring(lash_State *S, const char *code, const char *chunkname);
int lash_dofile(lash_State *S, const char *path);

/* Advance every task by at most one wait, blocking at most timeout_ms
** (0 polls, -1 waits for something). Returns 1 while work remains, 0 when
** idle, or a negative status. This is what an engine calls each frame. */
int lash_step(lash_State *S, int timeout_ms);
/* Run until no task is left. */
int lash_run(lash_State *S);
/* A file descriptor that becomes readable when lash_step has work, for
** engines that wait in their own poll/epoll. */
int lash_fd(lash_State *S);

/* Why the last call failed. Never NULL. */
const char *lash_errmsg(lash_State *S);

/* Bytes the Lua heap uses now; change the budget (0 = unlimited). */
size_t lash_memory_used(lash_State *S);
int lash_set_memory_limit(lash_State *S, size_t limit);

const char *lash_version(void);

#endif
