/*
** lproc.c: lash.proc, a long-lived child process with pipes to its stdin,
** stdout and (optionally) stderr, on the event loop. It exists for
** programs lash talks to while they run (an MCP server over stdio), where
** a one-shot exec with its output collected at the end does not fit.
**
**   local p = lash.proc.spawn{ argv = {"cat"}, env = {...}, cwd = "/",
**                              stdin = "pipe" | "inherit",
**                              stderr = "pipe" | "inherit" | "null" }
**   p:write(s)          waits until every byte is written
**   p:read([stream])    the next chunk of "stdout" (default) or "stderr",
**                       nil at end of file
**   p:close_stdin()     the child sees end of file
**   p:wait()            exit code, or nil and the signal number
**   p:kill([sig])       signals the child's process group (SIGTERM)
**   p:close()           closes the pipes; a child still running gets
**                       SIGKILL (with its group) and is reaped
**
** The child runs in its own session (its process group is its pid), gets
** SIGKILL when lash dies (PR_SET_PDEATHSIG), and inherits no descriptor
** but the three pipes. One reader per stream and one writer at a time.
*/
#include "runtime.h"
#include "laux.h"
#include "modules.h"
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

#define PROC_MT "lash.proc"
#define READ_CHUNK 65536

enum { S_STDIN, S_STDOUT, S_STDERR, S_N };

typedef struct proc proc;

typedef struct pwait {
  lash_wait w;
  proc *p;
  int which;                /* stream, or -1 for the exit wait */
  int busy;
  size_t off;               /* writer: bytes written so far */
} pwait;

struct proc {
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

static proc *check_proc(lua_State *L) {
  proc *p = luaL_checkudata(L, 1, PROC_MT);
  if (!p->loop) luaL_error(L, "lash.proc: the process handle is closed");
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

static int proc_close(lua_State *L) {
  proc *p = luaL_checkudata(L, 1, PROC_MT);
  int was_open = p->loop != NULL;
  proc_teardown(p);
  lua_pushboolean(L, was_open);
  return 1;
}

/* ---- spawning ------------------------------------------------------------ */

static char **string_list(lua_State *L, int idx, const char *what, int *n) {
  lua_Integer i, len = luaL_len(L, idx);
  char **v;
  if (len < 0 || len > 65536) luaL_error(L, "lash.proc.spawn: too many %s", what);
  v = lua_newuserdatauv(L, sizeof(char *) * (size_t)(len + 1), 0);
  for (i = 1; i <= len; i++) {
    if (lua_geti(L, idx, i) != LUA_TSTRING)
      luaL_error(L, "lash.proc.spawn: %s[%d] must be a string, got %s", what,
                 (int)i, luaL_typename(L, -1));
    v[i - 1] = (char *)lua_tostring(L, -1);
    if (strlen(v[i - 1]) != lua_rawlen(L, -1))
      luaL_error(L, "lash.proc.spawn: %s[%d] contains a NUL byte", what, (int)i);
    lua_pop(L, 1);   /* the string stays anchored by the argv table */
  }
  v[len] = NULL;
  *n = (int)len;
  return v;
}

/* env = {K = V} becomes a NULL-terminated "K=V" array (anchored on the
** stack as a table of strings plus a userdata). */
static char **env_list(lua_State *L, int idx) {
  int n = 0, i = 0;
  char **v;
  lua_newtable(L);
  int t = lua_gettop(L);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
      luaL_error(L, "lash.proc.spawn: env must map names to strings");
    const char *k = lua_tostring(L, -2);
    if (!*k || strchr(k, '=') || strlen(k) != lua_rawlen(L, -2))
      luaL_error(L, "lash.proc.spawn: env name '%s' is not a valid variable name", k);
    lua_pushfstring(L, "%s=%s", k, lua_tostring(L, -1));
    if (strlen(lua_tostring(L, -1)) != lua_rawlen(L, -1))
      luaL_error(L, "lash.proc.spawn: env value of '%s' contains a NUL byte", k);
    lua_rawseti(L, t, ++n);
    lua_pop(L, 1);
  }
  v = lua_newuserdatauv(L, sizeof(char *) * (size_t)(n + 1), 0);
  for (i = 0; i < n; i++) {
    lua_rawgeti(L, t, i + 1);
    v[i] = (char *)lua_tostring(L, -1);   /* anchored by table t */
    lua_pop(L, 1);
  }
  v[n] = NULL;
  return v;
}

static void child_fail(int errfd, int err) {
  ssize_t r = write(errfd, &err, sizeof err);
  (void)r;
  _exit(127);
}

/*** Start a process: {argv = {...}, env = {K = V} (default: lash's own
** environment), cwd =, stderr = "pipe" | "inherit" | "null"}. */
static int l_spawn(lua_State *L) {
  static const char *const modes[] = {"pipe", "inherit", "null", NULL};
  char **argv, **envp = NULL;
  const char *cwd = NULL;
  int argc, errmode, inmode, in[2] = {-1, -1}, out[2] = {-1, -1}, er[2] = {-1, -1};
  int ep[2] = {-1, -1}, err = 0, rc, s;
  ssize_t r;
  pid_t pid;
  proc *p;
  static const char *const options[] = {"argv", "env", "cwd", "stdin", "stderr",
                                         NULL};
  luaL_checktype(L, 1, LUA_TTABLE);
  lashA_checkoptions(L, 1, "lash.proc.spawn", options);
  if (lua_getfield(L, 1, "argv") != LUA_TTABLE)
    return luaL_error(L, "lash.proc.spawn: 'argv' must be a list of strings");
  argv = string_list(L, lua_gettop(L), "argv", &argc);
  if (argc == 0 || !*argv[0])
    return luaL_error(L, "lash.proc.spawn: 'argv' needs at least the program");
  if (lua_getfield(L, 1, "env") == LUA_TTABLE) envp = env_list(L, lua_gettop(L));
  else if (!lua_isnil(L, -1))
    return luaL_error(L, "lash.proc.spawn: 'env' must be a table of strings");
  if (lua_getfield(L, 1, "cwd") == LUA_TSTRING) cwd = lua_tostring(L, -1);
  else if (!lua_isnil(L, -1))
    return luaL_error(L, "lash.proc.spawn: 'cwd' must be a string");
  lua_getfield(L, 1, "stderr");
  errmode = luaL_checkoption(L, -1, "pipe", modes);
  lua_getfield(L, 1, "stdin");
  inmode = luaL_checkoption(L, -1, "pipe", modes);
  luaL_argcheck(L, inmode != 2, 1, "stdin must be \"pipe\" or \"inherit\"");

  p = lua_newuserdatauv(L, sizeof *p, 0);
  memset(p, 0, sizeof *p);
  for (s = 0; s < S_N; s++) {
    p->fd[s] = -1;
    p->op[s].p = p;
    p->op[s].which = s;
  }
  p->exitw.p = p;
  p->exitw.which = -1;
  p->child.pidfd = -1;
  p->group = 1;
  luaL_setmetatable(L, PROC_MT);

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
  return 1;
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

/*** The next chunk of output ("stdout" or "stderr"), nil at end of file. */
static int proc_read(lua_State *L) {
  static const char *const names[] = {"stdout", "stderr", NULL};
  proc *p = check_proc(L);
  int s = luaL_checkoption(L, 2, "stdout", names) + 1;
  pwait *op = &p->op[s];
  if (op->busy) return luaL_error(L, "lash.proc: another task is already reading %s", names[s - 1]);
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

/*** Write every byte of s to the child's stdin (waits while the pipe is
** full). Returns true, or nil, message, "io". */
static int proc_write(lua_State *L) {
  proc *p = check_proc(L);
  pwait *op = &p->op[S_STDIN];
  luaL_checkstring(L, 2);
  lua_settop(L, 2);
  if (op->busy) return luaL_error(L, "lash.proc: another task is already writing");
  op->off = 0;
  return write_now(L, op);
}

static int proc_close_stdin(lua_State *L) {
  proc *p = check_proc(L);
  close_stream(p, S_STDIN);
  return 0;
}

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

/*** Wait for the child to exit: its exit code, or nil and the signal. */
static int proc_wait(lua_State *L) {
  proc *p = luaL_checkudata(L, 1, PROC_MT);
  if (!p->running) return push_status(L, p->status);
  if (p->exitw.busy) return luaL_error(L, "lash.proc: another task is already waiting");
  lash_wait_init(&p->exitw.w, exit_cancel);
  p->exitw.busy = 1;
  return lash_wait_yield(L, &p->exitw.w, (lua_KContext)&p->exitw, exit_k);
}

/*** Signal the child's process group (default SIGTERM); false once it
** has been reaped. */
static int proc_kill(lua_State *L) {
  proc *p = check_proc(L);
  int sig = (int)luaL_optinteger(L, 2, SIGTERM);
  luaL_argcheck(L, sig > 0 && sig < 65, 2, "not a signal number");
  if (!p->running) {
    lua_pushboolean(L, 0);
    return 1;
  }
  if (p->group) kill(-p->pid, sig);
  if (p->hooks.signal) p->hooks.signal(p->hooks.ctx, sig);
  lash_child_kill(&p->child, sig);
  lua_pushboolean(L, 1);
  return 1;
}

static int proc_pid(lua_State *L) {
  proc *p = luaL_checkudata(L, 1, PROC_MT);
  lua_pushinteger(L, p->pid);
  return 1;
}

static int proc_running(lua_State *L) {
  proc *p = luaL_checkudata(L, 1, PROC_MT);
  lua_pushboolean(L, p->running);
  return 1;
}

static void push_metatable(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"read", proc_read}, {"write", proc_write}, {"close_stdin", proc_close_stdin},
    {"wait", proc_wait}, {"kill", proc_kill}, {"close", proc_close},
    {"pid", proc_pid}, {"running", proc_running}, {NULL, NULL}};
  if (luaL_newmetatable(L, PROC_MT)) {
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, proc_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, proc_close);
    lua_setfield(L, -2, "__close");
  }
}

void *lash_proc_push_empty(lua_State *L) {
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

int lash_proc_adopt(lua_State *L, void *h, pid_t pid, int in_fd, int out_fd,
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

int lash_open_proc(lua_State *L) {
  static const luaL_Reg funcs[] = {{"spawn", l_spawn}, {NULL, NULL}};
  push_metatable(L);
  lua_pop(L, 1);
  luaL_newlib(L, funcs);
  return 1;
}
