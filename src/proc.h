/*
** proc.h: handing a child that something else started to lash.proc, so
** that it gets the same handle (read, write, close_stdin, wait, kill,
** close) as lash.proc.spawn's. A sandbox backend uses it for a long-lived
** process inside a jail (sandbox:spawn): the backend spawns, lash.proc
** owns the pipes and the reaping, and the backend's hooks reach what a
** plain kill of the pid cannot (a jail's pid namespace) and release the
** backend's bookkeeping once the child is gone.
*/
#ifndef lash_proc_h
#define lash_proc_h

#include <sys/types.h>
#include "lua.h"

typedef struct lash_proc_hooks {
  /* Also deliver sig to whatever the pid alone does not reach (may be
  ** NULL). Called by p:kill and with SIGKILL by p:close / __gc. */
  void (*signal)(void *ctx, int sig);
  /* Called once, after the child was reaped and the pipes closed (or when
  ** adopting fails); frees ctx. May be NULL. */
  void (*release)(void *ctx);
  void *ctx;
} lash_proc_hooks;

/* Push an empty lash.proc handle (it behaves as a closed one) and return
** it, before starting the child, so that nothing can fail between the
** start and the handle owning the child. */
void *lash_proc_push_empty(lua_State *L);

/* Hand the running child pid (a child of this process) with its stdin,
** stdout and stderr pipes (any may be -1; they are made non-blocking) to
** the handle h. group: the child leads its own process group, which kill
** and close signal too. The handle owns the descriptors and the hooks from
** here on; when watching the child fails it kills and reaps it, releases
** the hooks and returns -errno (else 0). */
int lash_proc_adopt(lua_State *L, void *h, pid_t pid, int in_fd, int out_fd,
                    int err_fd, int group, const lash_proc_hooks *hooks);

#endif
