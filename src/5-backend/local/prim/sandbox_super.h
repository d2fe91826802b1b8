/*
** sandbox_super.h: lash's side of a local sandbox's supervisor (see
** sandbox_super.c; the supervisor itself is src/5-backend/local/prim/jaild/jaild.c). Internal to
** the local backend.
*/
#ifndef lash_sandbox_super_h
#define lash_sandbox_super_h

#include "loop.h"
#include "sandbox_jail.h"

#include <stdint.h>
#include <sys/types.h>

typedef struct lsb_super lsb_super;
typedef struct lsb_super_cmd lsb_super_cmd;

/* One command running under a supervisor, embedded in its owner's op.
** started() comes once: err 0 (running) or an errno with the stage
** (LSB_JD_STAGE_*); after a failure exited() does not follow. exited()
** comes once with the raw wait status (SIGKILL when the jail died). Both
** may run from the loop or from lsb_super_stop. */
struct lsb_super_cmd {
  uint32_t id;
  lsb_super *owner;          /* NULL once it is over or forgotten */
  lsb_super_cmd *next;
  int started_seen;
  void (*started)(lsb_super_cmd *c, int err, int stage);
  void (*exited)(lsb_super_cmd *c, int status);
};

struct lsb_super {
  lash_loop *loop;
  pid_t pid;                 /* bwrap, our child; -1 when stopped */
  int ctl;                   /* our end of the socketpair */
  int init_pidfd;            /* the supervisor (pid 1 of the jail) */
  int job_dirfd;             /* the sandbox's directory, for its job record */
  char job[64];
  lash_io io;                /* on ctl while commands are running */
  lsb_super_cmd *cmds;
  uint32_t next_id;
};

/* What the jail is made of: the jail description and the spawn options of
** bwrap (limits, credentials); path/argv/envp/pass_fd* are filled here. */
typedef struct lsb_super_spec {
  const lsb_jail *jail;
  lsb_spawn_opts spawn;
  long expires_in;           /* seconds until the sandbox expires (> 0) */
  int box_dirfd;             /* borrowed; a job record goes there */
} lsb_super_spec;

/* The NUL-separated strings of v (from index `from`, after `first` when
** given) written to a new memfd, left at its end (the caller rewinds it or
** reads its length): bwrap's --args, the exec payload. Returns the fd or
** -errno. */
int  lsb_strings_memfd(const char *name, char *const *v, size_t from,
                       const char *first);

void lsb_super_init(lsb_super *s, lash_loop *loop);
/* 1 while the jail runs (reads what the supervisor said meanwhile). */
int  lsb_super_alive(lsb_super *s);
/* Build the jail and wait (bounded, blocking) until its supervisor
** listens. Returns 0, or -errno with a reason in msg (bwrap's own message
** when the jail could not be built). */
int  lsb_super_start(lsb_super *s, const lsb_super_spec *spec, char *msg,
                     size_t msgsz);
/* Kill the jail (everything in it), reap bwrap, end every command with
** SIGKILL. Idempotent. */
void lsb_super_stop(lsb_super *s);
/* Hand a command to the supervisor: cwd (a path in the jail), argv, envp
** ("K=V"), and the jail's ends of its pipes (in_fd -1: /dev/null). The fds
** are not consumed. Returns 0 or -errno. */
int  lsb_super_exec(lsb_super *s, lsb_super_cmd *c, const char *cwd,
                    char *const *argv, char *const *envp, int in_fd,
                    int out_fd, int err_fd);
/* SIGKILL the command's session and what it left behind; exited() follows.
** When the request cannot be sent the whole jail is stopped. */
void lsb_super_kill(lsb_super_cmd *c);
/* Stop listening for c (its op is going away). */
void lsb_super_forget(lsb_super_cmd *c);

#endif
