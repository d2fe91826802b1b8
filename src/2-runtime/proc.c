/*
** proc.c: a long-lived child process with pipes to its stdin, stdout and
** (optionally) stderr, on the event loop (prefix lash_proc_, proc.h): the
** handle's lifecycle (idempotent close, __gc), spawning, adopting a child
** something else started, and the waits for reading, writing and exit.
** Its Lua face is lproc.c (lash.proc).
**
** The child runs in its own session (its process group is its pid), gets
** SIGKILL when lash dies (PR_SET_PDEATHSIG), and inherits no descriptor
** but the three pipes. One reader per stream and one writer at a time.
*/
#include "runtime.h"
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROC_MT LASH_PROC_MT
#define READ_CHUNK 65536

enum { S_STDIN, S_STDOUT, S_STDERR, S_N };

typedef struct lash_proc proc;

typedef struct pwait {
  lash_wait w;
  proc *p;
  int which;                /* stream, or -1 for the exit wait */
  int busy;
  size_t off;               /* writer: bytes written so far */
} pwait;

struct lash_proc {
  lash_loop *loop;
  lash_child child;
  pid_t pid;
  int running;              /* not yet reaped */
  int status;               /* raw wait status once reaped */
  int fd[S_N];
  lash_io io[S_N];
  pwait op[S_N];
  pwait exitw;
  int group;                /* the child leads a process group of its own */
  lash_proc_hooks hooks;    /* adopted children: what else to signal */
};

lash_proc *lash_proc_check(lua_State *L, int idx, int open) {
  proc *p = luaL_checkudata(L, idx, PROC_MT);
  if (open && !p->loop) luaL_error(L, "lash.proc: the process handle is closed");
  return p;
}

/* ---- lifecycle --------------------------------------------------------- */

static void on_exit_cb(lash_loop *loop, lash_child *c, int status) {
  proc *p = c->data;
  (void)loop;
  p->running = 0;
  p->status = status;
  /* an adopted child's remains (a jail's other processes) go with it */
  if (p->hooks.signal) p->hooks.signal(p->hooks.ctx, SIGKILL);
  if (p->exitw.busy) lash_wait_done(&p->exitw.w);
}

static void close_stream(proc *p, int s) {
  if (p->fd[s] < 0) return;
  lash_io_stop(p->loop, &p->io[s]);
  close(p->fd[s]);
  p->fd[s] = -1;
  if (p->op[s].busy) lash_wait_done(&p->op[s].w);
}

static void proc_teardown(proc *p) {
  int s, st;
  if (!p->loop) return;
  for (s = 0; s < S_N; s++) close_stream(p, s);
  if (p->running) {
    /* the group first (a server's own children), then the leader: its pid
    ** cannot be reused before we reap it, so the group id is still ours */
    if (p->group) kill(-p->pid, SIGKILL);
    if (p->hooks.signal) p->hooks.signal(p->hooks.ctx, SIGKILL);
    lash_child_kill(&p->child, SIGKILL);
    lash_child_stop(p->loop, &p->child);
    while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR) {}
    p->running = 0;
    p->status = st;
  } else {
    lash_child_stop(p->loop, &p->child);
  }
  if (p->hooks.signal) p->hooks.signal(p->hooks.ctx, SIGKILL);
  if (p->hooks.release) p->hooks.release(p->hooks.ctx);
  memset(&p->hooks, 0, sizeof p->hooks);
  if (p->exitw.busy) lash_wait_done(&p->exitw.w);
  p->loop = NULL;
}

static int proc_gc(lua_State *L) {
  proc_teardown(luaL_checkudata(L, 1, PROC_MT));
  return 0;
}

int lash_proc_close(lash_proc *p) {
  int was_open = p->loop != NULL;
  proc_teardown(p);
  return was_open;
}

static int proc_close(lua_State *L) {
  lua_pushboolean(L, lash_proc_close(luaL_checkudata(L, 1, PROC_MT)));
  return 1;
}

/* ---- spawning ------------------------------------------------------------ */

static void child_fail(int errfd, int err) {
  ssize_t r = write(errfd, &err, sizeof err);
  (void)r;
  _exit(127);
}

/* ---- spawning ------------------------------------------------------------ */

int lash_proc_spawn(lua_State *L, lash_proc *p, char **argv, char **envp,
                    const char *cwd, int inmode, int errmode) {
  int in[2] = {-1, -1}, out[2] = {-1, -1}, er[2] = {-1, -1};
  int ep[2] = {-1, -1}, err = 0, rc, s;
  ssize_t r;
  pid_t pid;
  p->group = 1;

  if ((inmode == 0 && pipe2(in, O_CLOEXEC)) || pipe2(out, O_CLOEXEC) || pipe2(ep, O_CLOEXEC) ||
      (errmode == 0 && pipe2(er, O_CLOEXEC))) {
    err = errno;
    goto fail;
  }
  pid = fork();
  if (pid < 0) {
    err = errno;
    goto fail;
  }
  if (pid == 0) {
    sigset_t all;
    int nul = -1;
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    signal(SIGPIPE, SIG_DFL);
    setsid();
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (errmode == 2) nul = open("/dev/null", O_WRONLY);
    if ((inmode == 0 && dup2(in[0], 0) < 0) || dup2(out[1], 1) < 0) child_fail(ep[1], errno);
    if (errmode == 0 && dup2(er[1], 2) < 0) child_fail(ep[1], errno);
    if (errmode == 2 && (nul < 0 || dup2(nul, 2) < 0)) child_fail(ep[1], errno);
    /* every other descriptor goes: the error pipe is close-on-exec */
    {
      int fd, maxfd = (int)sysconf(_SC_OPEN_MAX);
      if (maxfd < 0 || maxfd > 65536) maxfd = 65536;
#ifdef SYS_close_range
      if (syscall(SYS_close_range, 3, ep[1] - 1, 0) != 0 ||
          syscall(SYS_close_range, ep[1] + 1, ~0U, 0) != 0)
#endif
        for (fd = 3; fd < maxfd; fd++)
          if (fd != ep[1]) close(fd);
    }
    if (cwd && chdir(cwd) != 0) child_fail(ep[1], errno);
    if (envp) execvpe(argv[0], argv, envp);
    else execvp(argv[0], argv);
    child_fail(ep[1], errno);
  }
  if (in[0] >= 0) close(in[0]);
  in[0] = -1;
  close(out[1]);
  out[1] = -1;
  if (er[1] >= 0) {
    close(er[1]);
    er[1] = -1;
  }
  close(ep[1]);
  ep[1] = -1;
  p->pid = pid;
  p->running = 1;
  p->loop = lash_runtime_loop(L);
  p->fd[S_STDIN] = in[1];
  p->fd[S_STDOUT] = out[0];
  p->fd[S_STDERR] = er[0];
  for (s = 0; s < S_N; s++)
    if (p->fd[s] >= 0) fcntl(p->fd[s], F_SETFL, O_NONBLOCK);
  /* exec either succeeds (EOF here) or reports its errno */
  do r = read(ep[0], &err, sizeof err); while (r < 0 && errno == EINTR);
  close(ep[0]);
  ep[0] = -1;
  if ((rc = lash_child_start(p->loop, &p->child, pid, on_exit_cb, p)) != 0) {
    proc_teardown(p);
    return luaL_error(L, "lash.proc.spawn: cannot watch the child: %s", strerror(-rc));
  }
  if (r == (ssize_t)sizeof err) {
    proc_teardown(p);
    return lash_error_raise(L, "spawn", "cannot start '%s': %s%s", argv[0], strerror(err),
                            err == ENOENT ? " (is it installed and on PATH?)" : "");
  }
  return 0;
fail:
  {
    int *all[] = {in, out, er, ep};
    size_t i;
    for (i = 0; i < 4; i++) {
      if (all[i][0] >= 0) close(all[i][0]);
      if (all[i][1] >= 0) close(all[i][1]);
    }
  }
  return lash_error_raise(L, "spawn", "cannot start '%s': %s", argv[0], strerror(err));
}

/* ---- waits ----------------------------------------------------------------- */

static void on_io(lash_loop *loop, lash_io *io, unsigned events) {
  pwait *op = io->data;
  (void)events;
  lash_io_stop(loop, io);
  lash_wait_done(&op->w);
}

static void op_cancel(lash_wait *w) {
  pwait *op = (pwait *)w;
  if (op->which >= 0 && op->p->loop) lash_io_stop(op->p->loop, &op->p->io[op->which]);
  op->busy = 0;
}

static int op_arm(lua_State *L, pwait *op, unsigned events, lua_KFunction k) {
  proc *p = op->p;
  int rc;
  lash_wait_init(&op->w, op_cancel);
  op->busy = 1;
  rc = lash_io_start(p->loop, &p->io[op->which], p->fd[op->which], events, on_io, op);
  if (rc != 0) {
    op->busy = 0;
    return luaL_error(L, "lash.proc: cannot watch a pipe: %s", strerror(-rc));
  }
  return lash_wait_yield(L, &op->w, (lua_KContext)op, k);
}

static int read_k(lua_State *L, int status, lua_KContext ctx);

static int read_now(lua_State *L, pwait *op) {
  proc *p = op->p;
  char buf[READ_CHUNK];
  ssize_t n;
  if (p->fd[op->which] < 0) {
    lua_pushnil(L);
    return 1;
  }
  do n = read(p->fd[op->which], buf, sizeof buf); while (n < 0 && errno == EINTR);
  if (n > 0) {
    lua_pushlstring(L, buf, (size_t)n);
    return 1;
  }
  if (n == 0 || errno != EAGAIN) {
    int e = n == 0 ? 0 : errno;
    close_stream(p, op->which);
    if (e) return lash_error_result(L, "io", "reading from the child: %s", strerror(e));
    lua_pushnil(L);
    return 1;
  }
  return op_arm(L, op, LASH_READ, read_k);
}

static int read_k(lua_State *L, int status, lua_KContext ctx) {
  pwait *op = (pwait *)ctx;
  (void)status;
  op->busy = 0;
  lash_wait_check(L, &op->w);
  if (!op->p->loop) {
    lua_pushnil(L);
    return 1;
  }
  return read_now(L, op);
}

int lash_proc_read(lua_State *L, lash_proc *p, int stream) {
  pwait *op = &p->op[stream];
  if (op->busy)
    return luaL_error(L, "lash.proc: another task is already reading %s",
                      stream == S_STDERR ? "stderr" : "stdout");
  return read_now(L, op);
}

static int write_k(lua_State *L, int status, lua_KContext ctx);

/* write(2) without dying of SIGPIPE when the child has gone: block it for
** the call and swallow the one it raised. */
static ssize_t write_nosig(int fd, const char *s, size_t n) {
  sigset_t pipe_set, old, pending;
  struct timespec zero = {0, 0};
  ssize_t r;
  int saved;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  sigpending(&pending);
  int was_pending = sigismember(&pending, SIGPIPE);
  sigprocmask(SIG_BLOCK, &pipe_set, &old);
  do r = write(fd, s, n); while (r < 0 && errno == EINTR);
  saved = errno;
  if (r < 0 && saved == EPIPE && !was_pending)
    while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR) {}
  sigprocmask(SIG_SETMASK, &old, NULL);
  errno = saved;
  return r;
}

static int write_now(lua_State *L, pwait *op) {
  proc *p = op->p;
  size_t len;
  const char *data = lua_tolstring(L, 2, &len);
  while (op->off < len) {
    ssize_t n;
    if (p->fd[S_STDIN] < 0)
      return lash_error_result(L, "io", "the child's stdin is closed");
    n = write_nosig(p->fd[S_STDIN], data + op->off, len - op->off);
    if (n < 0) {
      if (errno == EAGAIN) return op_arm(L, op, LASH_WRITE, write_k);
      int e = errno;
      close_stream(p, S_STDIN);
      return lash_error_result(L, "io", "writing to the child: %s%s", strerror(e),
                               e == EPIPE ? " (it closed its stdin or exited)" : "");
    }
    op->off += (size_t)n;
  }
  lua_pushboolean(L, 1);
  return 1;
}

static int write_k(lua_State *L, int status, lua_KContext ctx) {
  pwait *op = (pwait *)ctx;
  (void)status;
  op->busy = 0;
  lash_wait_check(L, &op->w);
  if (!op->p->loop) return lash_error_result(L, "io", "the process handle was closed");
  return write_now(L, op);
}

int lash_proc_write(lua_State *L, lash_proc *p) {
  pwait *op = &p->op[S_STDIN];
  if (op->busy) return luaL_error(L, "lash.proc: another task is already writing");
  op->off = 0;
  return write_now(L, op);
}

void lash_proc_close_stdin(lash_proc *p) { close_stream(p, S_STDIN); }

static int push_status(lua_State *L, int st) {
  if (WIFEXITED(st)) {
    lua_pushinteger(L, WEXITSTATUS(st));
    return 1;
  }
  lua_pushnil(L);
  lua_pushinteger(L, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  return 2;
}

static int exit_k(lua_State *L, int status, lua_KContext ctx) {
  pwait *op = (pwait *)ctx;
  (void)status;
  op->busy = 0;
  lash_wait_check(L, &op->w);
  return push_status(L, op->p->status);
}

static void exit_cancel(lash_wait *w) { ((pwait *)w)->busy = 0; }

int lash_proc_wait(lua_State *L, lash_proc *p) {
  if (!p->running) return push_status(L, p->status);
  if (p->exitw.busy) return luaL_error(L, "lash.proc: another task is already waiting");
  lash_wait_init(&p->exitw.w, exit_cancel);
  p->exitw.busy = 1;
  return lash_wait_yield(L, &p->exitw.w, (lua_KContext)&p->exitw, exit_k);
}

int lash_proc_kill(lash_proc *p, int sig) {
  if (!p->running) return 0;
  if (p->group) kill(-p->pid, sig);
  if (p->hooks.signal) p->hooks.signal(p->hooks.ctx, sig);
  lash_child_kill(&p->child, sig);
  return 1;
}

pid_t lash_proc_pid(const lash_proc *p) { return p->pid; }
int lash_proc_running(const lash_proc *p) { return p->running; }

/* ---- the handle ------------------------------------------------------------ */

/* Push the handles' metatable: made once per state (by lash_proc_open, at
** luaopen, or here by the first handle a backend makes before that); its
** __gc and __close are the lifecycle's, lproc.c adds the methods. */
static void push_metatable(lua_State *L) {
  if (luaL_newmetatable(L, PROC_MT)) {
    lua_pushcfunction(L, proc_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, proc_close);
    lua_setfield(L, -2, "__close");
  }
}

void lash_proc_open(lua_State *L) {
  push_metatable(L);
  lua_pop(L, 1);
}

lash_proc *lash_proc_push_empty(lua_State *L) {
  proc *p = lua_newuserdatauv(L, sizeof *p, 0);
  int s;
  memset(p, 0, sizeof *p);
  for (s = 0; s < S_N; s++) {
    p->fd[s] = -1;
    p->op[s].p = p;
    p->op[s].which = s;
  }
  p->exitw.p = p;
  p->exitw.which = -1;
  p->child.pidfd = -1;
  push_metatable(L);
  lua_setmetatable(L, -2);
  return p;
}

int lash_proc_adopt(lua_State *L, lash_proc *h, pid_t pid, int in_fd, int out_fd,
                    int err_fd, int group, const lash_proc_hooks *hooks) {
  proc *p = h;
  int s, rc;
  p->pid = pid;
  p->running = 1;
  p->group = group;
  if (hooks) p->hooks = *hooks;
  p->fd[S_STDIN] = in_fd;
  p->fd[S_STDOUT] = out_fd;
  p->fd[S_STDERR] = err_fd;
  for (s = 0; s < S_N; s++)
    if (p->fd[s] >= 0) fcntl(p->fd[s], F_SETFL, O_NONBLOCK);
  p->loop = lash_runtime_loop(L);
  if ((rc = lash_child_start(p->loop, &p->child, pid, on_exit_cb, p)) != 0) {
    proc_teardown(p);
    return rc;
  }
  return 0;
}
