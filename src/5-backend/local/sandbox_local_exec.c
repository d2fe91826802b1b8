/*
** sandbox_local_exec.c: the local backend's command engine (prefix
** local_): exec (pipes read into tail rings as output arrives, a deadline
** that kills the command and what it left behind, cancellation that does
** the same, waiting through lash_wait_yield), the supervisors (one jail
** per sandbox and lua_State, sandbox_super.c), and spawn, a long-lived
** jailed process with its streams handed to lash.proc. Ops that wait are
** userdata anchored on the waiting thread's stack whose __gc kills and
** reaps what they started.
*/
#include "sandbox.h"
#include "sandbox_local_box.h"
#include "jaild/sandbox_jaild.h"
#include "sandbox_super.h"
#include "sandbox_seccomp.h"
#include "output.h"
#include "outq.h"
#include "runtime.h"
#include "proc.h"
#include "json.h"

#include <dirent.h>
#include <stddef.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EXEC_MT  "lash.sandbox.local.exec"
#define SUPER_MT "lash.sandbox.local.supervisor"
#define SUPERS_KEY "lash.sandbox.local.supervisors"
#define DRAIN_NS (2000000000ull)  /* pipes kept open by an escaped process */
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


/* ---- exec -------------------------------------------------------------------- */

typedef struct exec_op {
  lash_wait w;
  lash_loop *loop;
  lash_child child;
  lash_io out_io, err_io, in_io;
  lash_timer deadline, drain;
  int out_fd, err_fd, in_fd;
  lash_ring out, err;
  lash_outq *outq;          /* on_output (anchored in the opts table), or NULL */
  const char *in_data;      /* anchored: the opts table is on the stack */
  size_t in_len, in_off;
  pid_t pid;
  int group;                /* isolation none: kill the process group */
  int running;              /* started and not yet reaped */
  int status;
  int timed_out;
  lua_Integer applied;      /* the deadline used, seconds */
  int job_dirfd;            /* for removing the job record */
  char job[64];
  int jailed;               /* run by the sandbox's supervisor */
  lsb_super_cmd sc;         /* ... as this command */
  int start_err;            /* the supervisor could not start it */
  int start_stage;          /* LSB_JD_STAGE_* */
  const char *cwd;          /* for the start error: the op's user value */
} exec_op;

static void exec_stop_io(exec_op *op) {
  if (op->out_io.active) lash_io_stop(op->loop, &op->out_io);
  if (op->err_io.active) lash_io_stop(op->loop, &op->err_io);
  if (op->in_io.active) lash_io_stop(op->loop, &op->in_io);
  local_close_fd(&op->out_fd);
  local_close_fd(&op->err_fd);
  local_close_fd(&op->in_fd);
  lash_timer_stop(op->loop, &op->deadline);
  lash_timer_stop(op->loop, &op->drain);
}

static void exec_kill(exec_op *op) {
  if (!op->running) return;
  if (op->jailed) {
    lsb_super_kill(&op->sc);
    return;
  }
  if (op->group) kill(-op->pid, SIGKILL);
  if (lash_child_kill(&op->child, SIGKILL) != 0) kill(op->pid, SIGKILL);
}

/* After the kill: the pipes reach EOF once the last process of the jail is
** gone (the kernel tears the pid namespace down asynchronously). Wait for
** that, bounded, so that a cancelled command is really over on return. */
static void exec_wait_gone(exec_op *op, int ms) {
  uint64_t end = lash_now_ns() + (uint64_t)ms * 1000000ull;
  char buf[4096];
  while (op->out_fd >= 0 || op->err_fd >= 0) {
    struct pollfd p[2];
    int n = 0, i;
    uint64_t now = lash_now_ns();
    if (now >= end) break;
    if (op->out_fd >= 0) p[n++] = (struct pollfd){op->out_fd, POLLIN, 0};
    if (op->err_fd >= 0) p[n++] = (struct pollfd){op->err_fd, POLLIN, 0};
    if (poll(p, (nfds_t)n, (int)((end - now) / 1000000ull) + 1) <= 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (i = 0; i < n; i++) {
      ssize_t r;
      if (!p[i].revents) continue;
      r = read(p[i].fd, buf, sizeof buf);
      if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
        int *fd = p[i].fd == op->out_fd ? &op->out_fd : &op->err_fd;
        lash_io *io = fd == &op->out_fd ? &op->out_io : &op->err_io;
        if (io->active) lash_io_stop(op->loop, io);
        local_close_fd(fd);
      }
    }
  }
}

/* Kill, reap (blocking: SIGKILL is prompt) and release everything. */
static void exec_teardown(exec_op *op) {
  if (op->running && op->jailed) {
    /* the supervisor kills its session and what it left behind; the
    ** answer is not waited for, the pipes' end is */
    lsb_super_kill(&op->sc);
    lsb_super_forget(&op->sc);
    op->running = 0;
    exec_wait_gone(op, 1000);
  } else if (op->running) {
    int st;
    exec_kill(op);
    lash_child_stop(op->loop, &op->child);
    while (waitpid(op->pid, &st, 0) < 0 && errno == EINTR) {}
    if (op->group) kill(-op->pid, SIGKILL);
    op->running = 0;
    exec_wait_gone(op, 1000);
  }
  exec_stop_io(op);
  if (op->job_dirfd >= 0) {
    lsb_job_remove(op->job_dirfd, op->job);
    close(op->job_dirfd);
    op->job_dirfd = -1;
  }
}

static int exec_gc(lua_State *L) {
  exec_op *op = luaL_checkudata(L, 1, EXEC_MT);
  exec_teardown(op);
  lash_ring_free(&op->out);
  lash_ring_free(&op->err);
  return 0;
}

static void exec_check_done(exec_op *op) {
  if (!op->running && op->out_fd < 0 && op->err_fd < 0) {
    exec_stop_io(op);
    lash_wait_done(&op->w);
  }
}

static void exec_read(lash_loop *loop, lash_io *io, unsigned ev) {
  exec_op *op = io->data;
  int is_out = io == &op->out_io;
  int *fd = is_out ? &op->out_fd : &op->err_fd;
  lash_ring *r = is_out ? &op->out : &op->err;
  char buf[65536];
  (void)ev;
  for (;;) {
    ssize_t n = read(*fd, buf, sizeof buf);
    if (n > 0) {
      /* streamed first (on_output), then kept in the tail */
      if (op->outq) lash_outq_push(op->outq, is_out ? 1 : 2, buf, (size_t)n);
      lash_ring_feed(r, buf, (size_t)n);   /* ENOMEM: drop this chunk */
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    break;                                 /* EOF or error */
  }
  lash_io_stop(loop, io);
  local_close_fd(fd);
  exec_check_done(op);
}

static void exec_write(lash_loop *loop, lash_io *io, unsigned ev) {
  exec_op *op = io->data;
  (void)ev;
  while (op->in_off < op->in_len) {
    ssize_t n = write(op->in_fd, op->in_data + op->in_off,
                      op->in_len - op->in_off);
    if (n > 0) {
      op->in_off += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    break;   /* EPIPE: the command stopped reading */
  }
  lash_io_stop(loop, io);
  local_close_fd(&op->in_fd);
}

static void exec_drained(lash_loop *loop, lash_timer *t) {
  exec_op *op = t->data;
  (void)loop;
  /* something that escaped the kill still holds the pipes: stop waiting */
  if (op->out_io.active) lash_io_stop(op->loop, &op->out_io);
  if (op->err_io.active) lash_io_stop(op->loop, &op->err_io);
  local_close_fd(&op->out_fd);
  local_close_fd(&op->err_fd);
  exec_check_done(op);
}

static void exec_finished(exec_op *op, int status) {
  op->status = status;
  op->running = 0;
  lash_timer_stop(op->loop, &op->deadline);
  if (op->out_fd >= 0 || op->err_fd >= 0)
    lash_timer_start(op->loop, &op->drain, DRAIN_NS, exec_drained, op);
  exec_check_done(op);
}

static void exec_exited(lash_loop *loop, lash_child *c, int status) {
  exec_op *op = c->data;
  (void)loop;
  /* the command is over: a plain process group has to be killed */
  if (op->group) kill(-op->pid, SIGKILL);
  exec_finished(op, status);
}

#define OP_OF_CMD(c) ((exec_op *)((char *)(c) - offsetof(exec_op, sc)))

/* The supervisor's answers. Its session and what it left behind are
** already killed when exited() comes. */
static void exec_sup_started(lsb_super_cmd *c, int err, int stage) {
  exec_op *op = OP_OF_CMD(c);
  if (!err) return;
  op->start_err = err;
  op->start_stage = stage;
  exec_finished(op, 127 << 8);
}

static void exec_sup_exited(lsb_super_cmd *c, int status) {
  exec_finished(OP_OF_CMD(c), status);
}

static void exec_deadline(lash_loop *loop, lash_timer *t) {
  exec_op *op = t->data;
  (void)loop;
  op->timed_out = 1;
  exec_kill(op);
}

static void exec_cancel(lash_wait *w) {
  exec_teardown((exec_op *)w);
}

/* Copy every pair of from.env (when it is a table) into the table at t. */
static void merge_env(lua_State *L, int from, int t) {
  if (lua_getfield(L, from, "env") == LUA_TTABLE) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      lua_pushvalue(L, -2);
      lua_insert(L, -2);
      lua_rawset(L, t);
    }
  }
  lua_pop(L, 1);
}

/* Push the env of a command as a table: PATH and HOME, the sandbox's env,
** then the command's. */
static int exec_env(lua_State *L, int metat, int opts, const char *home) {
  int t;
  lua_newtable(L);
  t = lua_gettop(L);
  lua_pushliteral(L, DEFAULT_PATH);
  lua_setfield(L, t, "PATH");
  lua_pushstring(L, home);
  lua_setfield(L, t, "HOME");
  merge_env(L, metat, t);
  merge_env(L, opts, t);
  return t;
}

/* "K=V" strings of the env table at t, in an lsb_argv. */
static void env_strings(lua_State *L, int t, lsb_argv *out) {
  lua_pushnil(L);
  while (lua_next(L, t)) {
    lsb_argv_addf(out, "%s=%s", lua_tostring(L, -2), lua_tostring(L, -1));
    lua_pop(L, 1);
  }
}

/* The argv at index argt and the env table at envt as C strings. */
static void command_strings(lua_State *L, int argt, int envt, lsb_argv *argv,
                            lsb_argv *envs) {
  lua_Integer i, n = (lua_Integer)lua_rawlen(L, argt);
  for (i = 1; i <= n; i++) {
    lua_rawgeti(L, argt, i);
    lsb_argv_add(argv, lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  env_strings(L, envt, envs);
}

/* Spawn options with the sandbox's limits and credentials, no cgroup yet. */
static void spawn_opts_for(lsb_spawn_opts *so, const local_meta *m) {
  memset(so, 0, sizeof *so);
  so->cgroup_fds[0] = so->cgroup_fds[1] = -1;
  so->limits = &m->limits;
  so->drop = m->drop;
  so->uid = m->uid;
  so->gid = m->gid;
}

static int exec_k(lua_State *L, int status, lua_KContext ctx) {
  exec_op *op = (exec_op *)ctx;
  int code;
  (void)status;
  lash_wait_check(L, &op->w);
  exec_teardown(op);
  if (WIFEXITED(op->status)) code = WEXITSTATUS(op->status);
  else if (WIFSIGNALED(op->status)) code = 128 + WTERMSIG(op->status);
  else code = -1;
  lash_sandbox_push_exec_result(L, &op->out, &op->err, code, op->timed_out,
                                op->applied);
  if (op->start_err) {
    int e = op->start_err;
    lash_ring_free(&op->out);
    lash_ring_free(&op->err);
    if (op->start_stage == LSB_JD_STAGE_EXEC && (e == ENOENT || e == ENOTDIR))
      lash_sandbox_raise(L, LASH_SB_ERROR, "start_failed", "the command could "
                         "not start in the sandbox: '%s' was not found",
                         (lua_rawgeti(L, 3, 1), lua_tostring(L, -1)));
    if (op->start_stage == LSB_JD_STAGE_CHDIR)
      lash_sandbox_raise(L, LASH_SB_ERROR, "start_failed", "the command could "
                         "not start in the sandbox: Can't chdir to %s: %s",
                         op->cwd, strerror(e));
    lash_sandbox_raise(L, LASH_SB_ERROR, "start_failed", "the command could "
                       "not start in the sandbox (%s: %s)",
                       op->start_stage == LSB_JD_STAGE_EXEC ? "exec" :
                       op->start_stage == LSB_JD_STAGE_FORK ? "fork" :
                       "request", strerror(e));
  }
  lash_ring_free(&op->out);
  lash_ring_free(&op->err);
  return 1;
}

/* ---- the supervisors ---------------------------------------------------- */

/* One supervised jail per sandbox and lua_State (see sandbox_super.c),
** kept in a registry table by "<root>/<id>" and reused while it runs. A
** second lash process on the same sandbox builds its own: each jail ends
** with the process that built it, and nothing listens on a socket. */
static int super_gc(lua_State *L) {
  lsb_super *s = luaL_checkudata(L, 1, SUPER_MT);
  lsb_super_stop(s);
  return 0;
}

static void push_supers(lua_State *L) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, SUPERS_KEY) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, SUPERS_KEY);
  }
}

/* The running supervisor of sandbox id, or NULL. */
static lsb_super *find_super(lua_State *L, const char *root, const char *id) {
  lsb_super *s;
  push_supers(L);
  lua_pushfstring(L, "%s/%s", root, id);
  lua_rawget(L, -2);
  s = luaL_testudata(L, -1, SUPER_MT);
  lua_pop(L, 2);
  return s;
}

/* Stop the supervisor of id (destroy): nothing of the jail survives. */
void local_stop_super(lua_State *L, const char *root, const char *id) {
  lsb_super *s = find_super(L, root, id);
  if (!s) return;
  lsb_super_stop(s);
  push_supers(L);
  lua_pushfstring(L, "%s/%s", root, id);
  lua_pushnil(L);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

/* The supervisor of the sandbox m (its lock held: box), started when none
** runs (the first command, or the last jail died). Raises start_failed.
** May leave one closed to-be-closed slot on the stack. */
static lsb_super *ensure_super(lua_State *L, const char *root, const local_meta *m,
                               lsb_box *box, const lsb_cgroup *cg,
                               uint64_t cg_pids, uint64_t cg_memory) {
  lsb_super *s = find_super(L, root, m->id);
  lsb_super_spec spec;
  lsb_jail j;
  lsb_view *v;
  char msg[512];
  int rc;
  if (s && lsb_super_alive(s)) return s;
  if (!s) {
    push_supers(L);
    lua_pushfstring(L, "%s/%s", root, m->id);
    s = lua_newuserdatauv(L, sizeof *s, 0);
    lsb_super_init(s, lash_runtime_loop(L));
    if (luaL_newmetatable(L, SUPER_MT)) {
      lua_pushcfunction(L, super_gc);
      lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
    lua_rawset(L, -3);
    lua_pop(L, 1);
  }
  v = local_build_view(L, root, m, 0);
  memset(&j, 0, sizeof j);
  j.bwrap = m->bwrap;
  j.view = v;
  j.cwd = m->workdir;
  j.network = m->network;
  j.disable_userns = m->disable_userns;
  j.env = NULL;
  j.inner_uid = m->drop && m->uid >= LSB_UID_BASE ? LSB_INNER_UID : 0;
  memset(&spec, 0, sizeof spec);
  spec.jail = &j;
  spec.spawn.limits = &m->limits;
  spec.spawn.drop = m->drop;
  spec.spawn.uid = m->uid;
  spec.spawn.gid = m->gid;
  spec.expires_in = (long)lash_sandbox_deadline(LASH_SB_MAX_SECONDS,
                                                m->expires_at, 0);
  spec.box_dirfd = box->dirfd;
  spec.spawn.cgroup_fds[0] = spec.spawn.cgroup_fds[1] = -1;
  /* the jail goes into the sandbox's group, or not at all: its limits must
  ** hold, and every command descends from the supervisor */
  if (cg->version) {
    rc = lsb_cgroup_open(cg, cg_pids, cg_memory, spec.spawn.cgroup_fds);
    if (rc) {
      lsb_view_close(v);
      lash_sandbox_raise(L, LASH_SB_ERROR, "start_failed", "the command could "
                         "not start in the sandbox: cannot join its cgroup "
                         "(%s)", strerror(-rc));
    }
    spec.spawn.join_cgroup = 1;
  }
  rc = lsb_super_start(s, &spec, msg, sizeof msg);
  lsb_cgroup_close(spec.spawn.cgroup_fds);
  /* closed now; its slot stays (popping a to-be-closed slot is not safe
  ** on every Lua 5.4) */
  lsb_view_close(v);
  if (rc)
    lash_sandbox_raise(L, LASH_SB_ERROR, "start_failed", "the command could "
                       "not start in the sandbox: %s",
                       strncmp(msg, "bwrap: ", 7) == 0 ? msg + 7 : msg);
  return s;
}

/* The arguments (cfg, id, argv, opts) checked, the sandbox loaded (box
** and meta pushed at 5 and 6; what it read is kept for the next command,
** see sandbox_local_cache.c) with its cgroup record. */
static void open_for_command(lua_State *L, char *root, size_t rootsz,
                             lsb_box **box, local_meta *m, lsb_cgroup *cg,
                             uint64_t *pids, uint64_t *memory) {
  const char *id;
  luaL_checktype(L, 1, LUA_TTABLE);
  id = local_check_id(L, 2);
  luaL_checktype(L, 3, LUA_TTABLE);
  luaL_checktype(L, 4, LUA_TTABLE);
  lua_settop(L, 4);
  local_load_kept(L, 1, id, root, rootsz, box, m, cg, pids, memory);
}

/* The cwd of the options at opts, relative to the workdir (and
** inside the workspace when nothing else is exposed). */
static void resolve_cwd(lua_State *L, const local_meta *m, int opts, char *cwd,
                        size_t sz) {
  if (lua_getfield(L, opts, "cwd") == LUA_TSTRING) {
    if (lash_sandbox_path_join(m->workdir, lua_tostring(L, -1), cwd, sz) != 0)
      luaL_error(L, "cwd is too long");
  } else {
    snprintf(cwd, sz, "%s", m->workdir);
  }
  lua_pop(L, 1);
  if (m->isolation_none && !lsb_path_under(cwd, m->workdir))
    lash_sandbox_raise(L, LASH_SB_ERROR, "denied", "cwd %s is outside the "
                       "workspace %s (isolation = \"none\" exposes only the "
                       "workspace)", cwd, m->workdir);
}

int local_exec(lua_State *L) {
  char root[LSB_PATH_MAX], cwd[LSB_PATH_MAX];
  lsb_box *box;
  local_meta m;
  int metat, envt, opi, rc;
  lua_Integer timeout, maxout, applied;
  lsb_argv argv, envs;
  lsb_spawn sp;
  lsb_spawn_opts so;
  const char *stage = NULL;
  exec_op *op;
  lsb_super *sup = NULL;
  int inp[2] = {-1, -1}, outp[2] = {-1, -1}, errp[2] = {-1, -1};
  lsb_cgroup cg;
  uint64_t cg_pids = 0, cg_memory = 0;
  int cg_kept = 0;   /* so.cgroup_fds are the kept entry's */
  open_for_command(L, root, sizeof root, &box, &m, &cg, &cg_pids,
                   &cg_memory);                        /* 5 box, 6 meta */
  metat = 6;
  lua_getfield(L, 4, "timeout");
  timeout = lua_tointeger(L, -1);
  lua_getfield(L, 4, "max_output_bytes");
  maxout = lua_tointeger(L, -1);
  lua_pop(L, 2);
  /* never past the sandbox's own end */
  applied = lash_sandbox_deadline(timeout, m.expires_at, 0);
  resolve_cwd(L, &m, 4, cwd, sizeof cwd);
  envt = exec_env(L, metat, 4, m.workdir);
  /* the op: anchored on this stack until the wait ends */
  op = lua_newuserdatauv(L, sizeof *op, 1);
  opi = lua_gettop(L);
  memset(op, 0, sizeof *op);
  op->out_fd = op->err_fd = op->in_fd = op->job_dirfd = -1;
  op->child.pidfd = -1;
  op->loop = lash_runtime_loop(L);
  lash_timer_init(&op->deadline);
  lash_timer_init(&op->drain);
  lash_ring_init(&op->out, (size_t)maxout);
  lash_ring_init(&op->err, (size_t)maxout);
  if (luaL_newmetatable(L, EXEC_MT)) {
    lua_pushcfunction(L, exec_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  lash_wait_init(&op->w, exec_cancel);
  if (lua_getfield(L, 4, "on_output") != LUA_TNIL) op->outq = lash_outq_test(L, -1);
  lua_pop(L, 1);
  if (lua_getfield(L, 4, "stdin") == LUA_TSTRING)
    op->in_data = lua_tolstring(L, -1, &op->in_len);
  lua_pop(L, 1);
  /* the jail, built at the sandbox's first command (may raise) */
  if (!m.isolation_none) {
    /* the cwd for a start error, kept as the op's user value (a path
    ** buffer in every op would be most of what a command allocates) */
    lua_pushstring(L, cwd);
    op->cwd = lua_tostring(L, -1);
    lua_setiuservalue(L, opi, 1);
    sup = ensure_super(L, root, &m, box, &cg, cg_pids, cg_memory);
  }
  /* command lines, all C memory from here on: freed before any raise */
  lsb_argv_init(&argv);
  lsb_argv_init(&envs);
  command_strings(L, 3, envt, &argv, &envs);
  spawn_opts_for(&so, &m);
  so.want_stdin = op->in_data != NULL;
  so.outputs = 2;
  rc = 0;
  if (m.isolation_none) {
    /* the child searches PATH as execvp would, in the workspace and as
    ** the command's uid (a name with a slash is taken from there) */
    lua_getfield(L, envt, "PATH");
    so.search = lua_tostring(L, -1);
    lua_pop(L, 1);   /* still anchored in envt */
    if (!so.search) so.search = "";
    if (argv.oom || envs.oom) rc = -ENOMEM;
    else if (!argv.v || !argv.v[0]) rc = -ENOENT;
    so.path = rc ? "" : argv.v[0];
    so.argv = argv.v;
    so.envp = envs.v;
    so.chdir = cwd;
    so.new_session = 1;
    op->group = 1;
    if (rc) stage = "find";
    if (!rc && cg.version) {
      /* into the sandbox's group, or not at all: its limits must hold */
      rc = local_kept_cgroup(box, &cg, cg_pids, cg_memory, 0, so.cgroup_fds,
                            &cg_kept);
      if (rc) stage = "joining the sandbox's cgroup";
      so.join_cgroup = 1;
    }
  } else {
    /* the pipes go to the jail's supervisor, which runs the command */
    op->jailed = 1;
    op->sc.started = exec_sup_started;
    op->sc.exited = exec_sup_exited;
    stage = "pipe";
    if (argv.oom || envs.oom) rc = -ENOMEM;
    if (!rc && (pipe2(outp, O_CLOEXEC) != 0 || pipe2(errp, O_CLOEXEC) != 0 ||
                (op->in_data && pipe2(inp, O_CLOEXEC) != 0)))
      rc = -errno;
    if (!rc) {
      stage = "supervisor";
      rc = lsb_super_exec(sup, &op->sc, cwd, argv.v, envs.v, inp[0], outp[1],
                          errp[1]);
    }
    local_close_fd(&inp[0]);
    local_close_fd(&outp[1]);
    local_close_fd(&errp[1]);
    if (rc) {
      local_close_fd(&inp[1]);
      local_close_fd(&outp[0]);
      local_close_fd(&errp[0]);
    }
    sp.pid = -1;
    sp.in_fd = inp[1];
    sp.out_fd = outp[0];
    sp.err_fd = errp[0];
    if (sp.in_fd >= 0) fcntl(sp.in_fd, F_SETFL, O_NONBLOCK);
    if (sp.out_fd >= 0) fcntl(sp.out_fd, F_SETFL, O_NONBLOCK);
    if (sp.err_fd >= 0) fcntl(sp.err_fd, F_SETFL, O_NONBLOCK);
  }
  if (!rc && !op->jailed) {
    rc = lsb_spawn_child(&so, &sp, &stage);
    if (rc && cg_kept && stage && strcmp(stage, "cgroup") == 0) {
      /* the kept group's files went stale (it was removed): open it again,
      ** made anew */
      rc = local_kept_cgroup(box, &cg, cg_pids, cg_memory, 1, so.cgroup_fds,
                            &cg_kept);
      if (rc) stage = "joining the sandbox's cgroup";
      else rc = lsb_spawn_child(&so, &sp, &stage);
    }
  }
  if (!cg_kept) lsb_cgroup_close(so.cgroup_fds);
  lsb_argv_free(&argv);
  lsb_argv_free(&envs);
  if (rc == -ENOENT && stage &&
      (strcmp(stage, "find") == 0 || strcmp(stage, "exec") == 0))
    lash_sandbox_raise(L, LASH_SB_ERROR, "start_failed", "the command could "
                       "not start in the sandbox: '%s' was not found",
                       (lua_rawgeti(L, 3, 1), lua_tostring(L, -1)));
  if (rc)
    lash_sandbox_raise(L, LASH_SB_ERROR, "start_failed", "the command could "
                       "not start in the sandbox (%s: %s)", stage ? stage : "?",
                       strerror(-rc));
  op->pid = sp.pid;
  op->running = 1;
  op->applied = applied;
  op->out_fd = sp.out_fd;
  op->err_fd = sp.err_fd;
  op->in_fd = sp.in_fd;
  /* a job record under the lock, so that destroy can find it (a jailed
  ** command is under its supervisor's) */
  if (!op->jailed) {
    op->job_dirfd = dup(box->dirfd);
    if (op->job_dirfd >= 0 &&
        lsb_job_add(op->job_dirfd, op->pid, op->job, sizeof op->job) != 0)
      op->job[0] = '\0';
  }
  lsb_box_close(box);
  if ((!op->jailed &&
       (rc = lash_child_start(op->loop, &op->child, op->pid, exec_exited, op))) ||
      (rc = lash_io_start(op->loop, &op->out_io, op->out_fd, LASH_READ,
                          exec_read, op)) ||
      (rc = lash_io_start(op->loop, &op->err_io, op->err_fd, LASH_READ,
                          exec_read, op)) ||
      (op->in_fd >= 0 && (rc = lash_io_start(op->loop, &op->in_io, op->in_fd,
                                             LASH_WRITE, exec_write, op))) ||
      (rc = lash_timer_start(op->loop, &op->deadline,
                             (uint64_t)applied * 1000000000ull, exec_deadline,
                             op))) {
    exec_teardown(op);
    lash_sandbox_raise(L, LASH_SB_ERROR, "io", "cannot watch the command: %s",
                       strerror(-rc));
  }
  return lash_wait_yield(L, &op->w, (lua_KContext)op, exec_k);
}

/* ---- spawn: a long-lived process with its streams ------------------------- */

/* What lash.proc cannot know about a jailed child: bwrap's --info-fd (the
** pid namespace's init, to kill the whole jail) and the job record that
** lets destroy find it. Freed by spawn_release once lash.proc has reaped
** bwrap. */
typedef struct spawn_ctx {
  int info_fd;
  int init_pidfd;
  char info[512];
  size_t info_len;
  int job_dirfd;
  char job[64];
} spawn_ctx;

static void spawn_read_info(spawn_ctx *c) {
  char *p;
  while (c->info_fd >= 0 && c->info_len < sizeof c->info - 1) {
    ssize_t n = read(c->info_fd, c->info + c->info_len,
                     sizeof c->info - 1 - c->info_len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;   /* EAGAIN: not yet; EOF: bwrap is done with it */
    c->info_len += (size_t)n;
  }
  c->info[c->info_len] = '\0';
  if (c->init_pidfd < 0 && (p = strstr(c->info, "\"child-pid\"")) != NULL) {
    long pid;
    p = strchr(p, ':');
    pid = p ? strtol(p + 1, NULL, 10) : 0;
    if (pid > 1) c->init_pidfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
  }
}

/* Wait (bounded, blocking) until bwrap names the jail's init: it does as
** soon as the namespace exists (milliseconds), or closes the pipe if it
** dies first. Until then a kill of bwrap alone could orphan a jail whose
** --die-with-parent is not armed yet. */
static void spawn_await_init(spawn_ctx *c, int ms) {
  uint64_t end = lash_now_ns() + (uint64_t)ms * 1000000ull;
  spawn_read_info(c);
  while (c->init_pidfd < 0 && c->info_fd >= 0) {
    struct pollfd pf = {c->info_fd, POLLIN, 0};
    uint64_t now = lash_now_ns();
    size_t before;
    int r;
    if (now >= end) break;
    r = poll(&pf, 1, (int)((end - now) / 1000000ull) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    before = c->info_len;
    spawn_read_info(c);
    if (c->info_len == before && c->init_pidfd < 0) break;   /* EOF */
  }
}

static void spawn_signal(void *ud, int sig) {
  spawn_ctx *c = ud;
  if (sig == SIGKILL) spawn_await_init(c, 2000);
  else spawn_read_info(c);
  /* the namespace's init ignores what it has no handler for, but SIGKILL
  ** from outside takes it and so every process of the jail */
  if (c->init_pidfd >= 0)
    syscall(SYS_pidfd_send_signal, c->init_pidfd, sig,
            NULL, 0);
}

static void spawn_release(void *ud) {
  spawn_ctx *c = ud;
  if (c->init_pidfd >= 0) {
    syscall(SYS_pidfd_send_signal, c->init_pidfd, SIGKILL, NULL, 0);
    close(c->init_pidfd);
  }
  if (c->info_fd >= 0) close(c->info_fd);
  if (c->job_dirfd >= 0) {
    if (c->job[0]) lsb_job_remove(c->job_dirfd, c->job);
    close(c->job_dirfd);
  }
  free(c);
}

/* spawn(cfg, id, argv, opts) -> a lash.proc handle: the command runs in
** the same jail as exec's (view, masks, namespaces, uid, rlimits, network
** policy, env), with no deadline and its stdin, stdout and stderr as pipes
** on the loop. It is recorded as a job, so destroying the sandbox ends it. */
int local_spawn(lua_State *L) {
  char root[LSB_PATH_MAX], cwd[LSB_PATH_MAX];
  const char *stage = NULL;
  lsb_box *box;
  local_meta m;
  int envt, rc = 0, i, argsfd = -1, scfd = -1, infop[2] = {-1, -1};
  lsb_argv argv, envs, jargv;
  lsb_spawn sp;
  lsb_spawn_opts so;
  lsb_view *v = NULL;
  char *empty[] = {NULL};
  spawn_ctx *c;
  lash_proc_hooks hooks;
  void *handle;
  lsb_cgroup cg;
  uint64_t cg_pids = 0, cg_memory = 0;
  open_for_command(L, root, sizeof root, &box, &m, &cg, &cg_pids,
                   &cg_memory);                        /* 5 box, 6 meta */
  rc = 0;
  handle = lash_proc_push_empty(L);                 /* 7: owns the child */
  resolve_cwd(L, &m, 4, cwd, sizeof cwd);
  envt = exec_env(L, 6, 4, m.workdir);
  if (!m.isolation_none) v = local_build_view(L, root, &m, 0);
  c = calloc(1, sizeof *c);
  if (!c) luaL_error(L, "out of memory");
  c->info_fd = c->init_pidfd = c->job_dirfd = -1;
  lsb_argv_init(&argv);
  lsb_argv_init(&envs);
  lsb_argv_init(&jargv);
  command_strings(L, 3, envt, &argv, &envs);
  spawn_opts_for(&so, &m);
  so.want_stdin = 1;
  so.outputs = 2;
  if (argv.oom || envs.oom) rc = -ENOMEM;
  if (m.isolation_none) {
    /* searched by the child, as exec's */
    lua_getfield(L, envt, "PATH");
    so.search = lua_tostring(L, -1);
    lua_pop(L, 1);   /* still anchored in envt */
    if (!so.search) so.search = "";
    if (!rc && (!argv.v || !argv.v[0])) {
      rc = -ENOENT;
      stage = "find";
    }
    so.path = rc ? "" : argv.v[0];
    so.argv = argv.v;
    so.envp = envs.v;
    so.chdir = cwd;
    so.new_session = 1;
  } else if (!rc) {
    lsb_jail j;
    memset(&j, 0, sizeof j);
    j.bwrap = m.bwrap;
    j.view = v;
    j.cwd = cwd;
    j.network = m.network;
    j.disable_userns = m.disable_userns;
    j.env = (const char *const *)envs.v;
    j.inner_uid = m.drop && m.uid >= LSB_UID_BASE ? LSB_INNER_UID : 0;
    rc = lsb_jail_argv(&j, NULL, &jargv);
    stage = "argv";
    lsb_argv_add(&jargv, "--info-fd");
    lsb_argv_add(&jargv, "5");
    lsb_argv_add(&jargv, "--seccomp");   /* sandbox_seccomp.c */
    lsb_argv_add(&jargv, "8");
    if (!rc && (scfd = lsb_seccomp_memfd()) < 0) {
      rc = scfd;
      scfd = -1;
      stage = "seccomp filter";
    }
    if (!rc && jargv.oom) rc = -ENOMEM;
    if (!rc && (argsfd = lsb_strings_memfd("lash-bwrap-args", jargv.v, 1,
                                           NULL)) < 0) {
      rc = argsfd;
      argsfd = -1;
    }
    if (!rc && lseek(argsfd, 0, SEEK_SET) != 0) rc = -errno;
    if (!rc && pipe2(infop, O_CLOEXEC) != 0) rc = -errno;
    lsb_argv_free(&jargv);
    lsb_argv_add(&jargv, m.bwrap);
    lsb_argv_add(&jargv, "--args");
    lsb_argv_add(&jargv, "4");
    lsb_argv_add(&jargv, "--");
    for (i = 0; (size_t)i < argv.n; i++) lsb_argv_add(&jargv, argv.v[i]);
    if (!rc && jargv.oom) rc = -ENOMEM;
    so.path = m.bwrap;
    so.argv = jargv.v;
    so.envp = empty;
    so.pass_fd = argsfd;
    so.pass_fd2 = infop[1];
    so.pass_fd5 = scfd;
    so.fresh_keyring = 1;
  }
  if (!rc && cg.version) {
    /* into the sandbox's group, or not at all: its limits must hold */
    rc = lsb_cgroup_open(&cg, cg_pids, cg_memory, so.cgroup_fds);
    if (rc) stage = "joining the sandbox's cgroup";
    so.join_cgroup = 1;
  }
  if (!rc) rc = lsb_spawn_child(&so, &sp, &stage);
  lsb_cgroup_close(so.cgroup_fds);
  if (argsfd >= 0) close(argsfd);
  if (scfd >= 0) close(scfd);
  if (infop[1] >= 0) close(infop[1]);
  lsb_argv_free(&argv);
  lsb_argv_free(&envs);
  lsb_argv_free(&jargv);
  if (v) lsb_view_close(v);
  if (rc) {
    if (infop[0] >= 0) close(infop[0]);
    free(c);
    if (rc == -ENOENT && stage &&
        (strcmp(stage, "find") == 0 || strcmp(stage, "exec") == 0))
      lash_sandbox_raise(L, LASH_SB_ERROR, "start_failed", "the command could "
                         "not start in the sandbox: '%s' was not found",
                         (lua_rawgeti(L, 3, 1), lua_tostring(L, -1)));
    lash_sandbox_raise(L, LASH_SB_ERROR, "start_failed", "the command could "
                       "not start in the sandbox (%s: %s)", stage ? stage : "?",
                       strerror(-rc));
  }
  c->info_fd = infop[0];
  if (c->info_fd >= 0) {
    fcntl(c->info_fd, F_SETFL, O_NONBLOCK);
    /* know the jail's init before anyone (destroy included) can kill bwrap */
    spawn_await_init(c, 5000);
  }
  /* a job record under the lock, so that destroy can find it */
  c->job_dirfd = dup(box->dirfd);
  if (c->job_dirfd >= 0 &&
      lsb_job_add(c->job_dirfd, sp.pid, c->job, sizeof c->job) != 0)
    c->job[0] = '\0';
  lsb_box_close(box);
  hooks.signal = m.isolation_none ? NULL : spawn_signal;
  hooks.release = spawn_release;
  hooks.ctx = c;
  rc = lash_proc_adopt(L, handle, sp.pid, sp.in_fd, sp.out_fd, sp.err_fd,
                       m.isolation_none, &hooks);
  if (rc)
    lash_sandbox_raise(L, LASH_SB_ERROR, "io", "cannot watch the command: %s",
                       strerror(-rc));
  lua_pushvalue(L, 7);
  return 1;
}

