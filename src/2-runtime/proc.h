/*
** proc.h: process handles (proc.c, prefix lash_proc_): a long-lived child
** with pipes, on the loop; lash.proc (lproc.c) is their Lua face.
**
** A child that something else started can be handed to a handle, so that
** it gets the same methods (read, write, close_stdin, wait, kill, close)
** as lash.proc.spawn's. A sandbox backend uses it for a long-lived process
** inside a jail (sandbox:spawn): the backend spawns, the handle owns the
** pipes and the reaping, and the backend's hooks reach what a plain kill
** of the pid cannot (a jail's pid namespace) and release the backend's
** bookkeeping once the child is gone.
*/
#ifndef lash_proc_h
#define lash_proc_h

#include <sys/types.h>
#include "lua.h"

#define LASH_PROC_MT "lash.proc"

typedef struct lash_proc lash_proc;

enum { LASH_PROC_STDIN, LASH_PROC_STDOUT, LASH_PROC_STDERR };
/* what a spawned child's stdin / stderr is */
enum { LASH_PROC_PIPE, LASH_PROC_INHERIT, LASH_PROC_NULL };

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
lash_proc *lash_proc_push_empty(lua_State *L);

/* Hand the running child pid (a child of this process) with its stdin,
** stdout and stderr pipes (any may be -1; they are made non-blocking) to
** the handle h. group: the child leads its own process group, which kill
** and close signal too. The handle owns the descriptors and the hooks from
** here on; when watching the child fails it kills and reaps it, releases
** the hooks and returns -errno (else 0). */
int lash_proc_adopt(lua_State *L, lash_proc *h, pid_t pid, int in_fd, int out_fd,
                    int err_fd, int group, const lash_proc_hooks *hooks);

/* Make the handles' metatable (__gc, __close), once per state. */
void lash_proc_open(lua_State *L);

/* Start argv[0] (PATH searched) in the empty handle p, with envp (NULL:
** lash's own environment), cwd (NULL: ours), stdin LASH_PROC_PIPE or
** _INHERIT and stderr any LASH_PROC_* mode; stdout is a pipe. Returns 0;
** raises a "spawn" error when the program cannot start. */
int lash_proc_spawn(lua_State *L, lash_proc *p, char **argv, char **envp,
                    const char *cwd, int inmode, int errmode);

/* The handle at idx; with open, raises if it is closed. */
lash_proc *lash_proc_check(lua_State *L, int idx, int open);
/* Close the pipes; a child still running gets SIGKILL (with its group)
** and is reaped. Idempotent: returns whether the handle was open. */
int   lash_proc_close(lash_proc *p);
/* Use as `return lash_proc_...(...)` (they may wait): the next chunk of
** stream LASH_PROC_STDOUT or _STDERR (nil at end of file); write every
** byte of the string at stack index 2 (true, or nil, message, "io"); the
** exit: its code, or nil and the signal. */
int   lash_proc_read(lua_State *L, lash_proc *p, int stream);
int   lash_proc_write(lua_State *L, lash_proc *p);
int   lash_proc_wait(lua_State *L, lash_proc *p);
void  lash_proc_close_stdin(lash_proc *p);
/* Signal the child's process group; 0 once it has been reaped. */
int   lash_proc_kill(lash_proc *p, int sig);
pid_t lash_proc_pid(const lash_proc *p);
int   lash_proc_running(const lash_proc *p);

#endif
