/*
** sandbox_local_fileop.c: the local backend's file operations (prefix
** local_): stat, read_file, write_file and list_dir, each run in a helper
** child that sees the sandbox's view with the jail's credentials
** (sandbox_view.c), its reply read on the loop while the caller waits,
** and every failure raised as the typed error sandbox.h names.
*/
#include "sandbox.h"
#include "sandbox_local_box.h"
#include "output.h"
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

#define FOP_MT   "lash.sandbox.local.fileop"
#define LIST_MAX (64u << 20)

/* ---- file operations ---------------------------------------------------------- */

typedef struct fop_op {
  lash_wait w;
  lash_loop *loop;
  lash_child child;
  lash_io io;
  int fd;
  pid_t pid;
  int running;
  int status;
  char *buf;
  size_t len, cap, limit;
  int overflow;
  int op;
  uint64_t max_bytes;
} fop_op;

static void fop_teardown(fop_op *f) {
  if (f->running) {
    int st;
    lash_child_stop(f->loop, &f->child);
    kill(f->pid, SIGKILL);
    while (waitpid(f->pid, &st, 0) < 0 && errno == EINTR) {}
    f->running = 0;
  }
  if (f->io.active) lash_io_stop(f->loop, &f->io);
  local_close_fd(&f->fd);
}

static int fop_gc(lua_State *L) {
  fop_op *f = luaL_checkudata(L, 1, FOP_MT);
  fop_teardown(f);
  free(f->buf);
  f->buf = NULL;
  return 0;
}

static void fop_check_done(fop_op *f) {
  if (!f->running && f->fd < 0) lash_wait_done(&f->w);
}

static void fop_read(lash_loop *loop, lash_io *io, unsigned ev) {
  fop_op *f = io->data;
  (void)ev;
  for (;;) {
    ssize_t n;
    if (f->len == f->limit) {
      /* full: anything more means the reply is over the limit */
      char probe1;
      n = read(f->fd, &probe1, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      if (n > 0) {
        f->overflow = 1;
        if (f->running) kill(f->pid, SIGKILL);
      }
      break;
    }
    if (f->len == f->cap) {
      size_t nc = f->cap ? f->cap * 2 : 65536;
      char *nb;
      if (nc > f->limit) nc = f->limit;
      nb = realloc(f->buf, nc);
      if (!nb) {
        f->overflow = 1;
        if (f->running) kill(f->pid, SIGKILL);
        break;
      }
      f->buf = nb;
      f->cap = nc;
    }
    n = read(f->fd, f->buf + f->len, f->cap - f->len);
    if (n > 0) {
      f->len += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    break;
  }
  lash_io_stop(loop, io);
  local_close_fd(&f->fd);
  fop_check_done(f);
}

static void fop_exited(lash_loop *loop, lash_child *c, int status) {
  fop_op *f = c->data;
  (void)loop;
  f->status = status;
  f->running = 0;
  fop_check_done(f);
}

static void fop_cancel(lash_wait *w) {
  fop_teardown((fop_op *)w);
}

static void raise_fop(lua_State *L, const lsb_reply *r, const char *path,
                      const local_meta *m) {
  switch (r->status) {
  case LSB_E_NOTFOUND:
    lash_sandbox_raise_path(L, LASH_SB_PATH_NOT_FOUND, path);
    break;
  case LSB_E_DENIED:
    lash_sandbox_raise(L, LASH_SB_ERROR, "denied", "'%s' is not accessible in "
                       "the sandbox (permission denied, or a path kept from "
                       "it: host secrets, other sandboxes, /proc, /dev, /sys%s)",
                       path, m->isolation_none ? ", anything outside the "
                       "workspace" : "");
    break;
  case LSB_E_READONLY:
    lash_sandbox_raise(L, LASH_SB_ERROR, "read_only", "'%s' is on the "
                       "sandbox's read-only root; write under %s or /tmp",
                       path, m->workdir);
    break;
  case LSB_E_NOTDIR:
    lash_sandbox_raise_path(L, LASH_SB_PATH_NOT_DIR, path);
    break;
  case LSB_E_ISDIR:
    lash_sandbox_raise_path(L, LASH_SB_PATH_IS_DIR, path);
    break;
  case LSB_E_TOOLARGE:
    lash_sandbox_raise_too_large(L, path, (lua_Integer)r->a, (lua_Integer)r->b,
                                 NULL);
    break;
  case LSB_E_NOTREG:
    lash_sandbox_raise_path(L, LASH_SB_PATH_NOT_REGULAR, path);
    break;
  case LSB_E_LOOP:
    lash_sandbox_raise(L, LASH_SB_ERROR, "loop", "'%s': too many levels of "
                       "symbolic links, or the path changed while it was "
                       "resolved", path);
    break;
  case LSB_E_EXISTS:
    lash_sandbox_raise_path(L, LASH_SB_PATH_PARENT_NOT_DIR, path);
    break;
  case LSB_E_NAMETOOLONG:
    lash_sandbox_raise(L, LASH_SB_ERROR, "invalid", "'%s': path too long",
                       path);
    break;
  default:
    lash_sandbox_raise(L, LASH_SB_ERROR, "io", "'%s': %s", path,
                       strerror(r->err ? r->err : EIO));
  }
}

static const char *kind_name(int k) {
  switch (k) {
  case 'f': return "file";
  case 'd': return "dir";
  case 'l': return "symlink";
  default: return "other";
  }
}

/* Continuation of every file op. Stack: cfg, id, path, [arg], ..., the
** meta table at 6 (kept for messages), the op on top. */
static int fop_k(lua_State *L, int status, lua_KContext ctx) {
  fop_op *f = (fop_op *)ctx;
  lsb_reply r;
  local_meta m;
  const char *path = lua_tostring(L, 3);
  (void)status;
  lash_wait_check(L, &f->w);
  fop_teardown(f);
  lua_pushvalue(L, 2);
  local_meta_parse(L, 6, lua_tostring(L, -1), &m);
  if (f->overflow)
    lash_sandbox_raise(L, LASH_SB_ERROR, "io", "'%s': the reply was too large "
                       "(over %I bytes)", path, (lua_Integer)f->limit);
  if (f->len < sizeof r)
    lash_sandbox_raise(L, LASH_SB_ERROR, "io", "'%s': the file operation "
                       "failed (helper status %d)", path, f->status);
  memcpy(&r, f->buf, sizeof r);
  if (r.status != LSB_OK) raise_fop(L, &r, path, &m);
  if (!WIFEXITED(f->status) || WEXITSTATUS(f->status) != 0)
    lash_sandbox_raise(L, LASH_SB_ERROR, "io", "'%s': the file operation "
                       "failed part way (helper status %d)", path, f->status);
  switch (f->op) {
  case LSB_OP_STAT:
    lua_createtable(L, 0, 4);
    lua_pushstring(L, kind_name(r.kind));
    lua_setfield(L, -2, "kind");
    lua_pushinteger(L, (lua_Integer)r.a);
    lua_setfield(L, -2, "size");
    lua_pushinteger(L, r.mode);
    lua_setfield(L, -2, "mode");
    lua_pushinteger(L, (lua_Integer)r.b);
    lua_setfield(L, -2, "mtime");
    return 1;
  case LSB_OP_READ: {
    size_t n = f->len - sizeof r;
    if (n > f->max_bytes) {   /* it grew between the size check and the read */
      lsb_reply t = r;
      t.status = LSB_E_TOOLARGE;
      t.a = r.a > (int64_t)n ? r.a : (int64_t)n;
      t.b = (int64_t)f->max_bytes;
      raise_fop(L, &t, path, &m);
    }
    lua_pushlstring(L, f->buf + sizeof r, n);
    return 1;
  }
  case LSB_OP_WRITE:
    return 0;
  case LSB_OP_LIST: {
    size_t off = sizeof r;
    int i = 0;
    lua_newtable(L);
    while (off < f->len) {
      char kind = f->buf[off++];
      const char *name = f->buf + off;
      size_t nl = strnlen(name, f->len - off);
      if (off + nl >= f->len) break;   /* unterminated: helper cut short */
      off += nl + 1;
      lua_createtable(L, 0, 2);
      lua_pushlstring(L, name, nl);
      lua_setfield(L, -2, "name");
      lua_pushstring(L, kind_name(kind));
      lua_setfield(L, -2, "kind");
      lua_rawseti(L, -2, ++i);
    }
    return 1;
  }
  }
  return 0;
}

/* Shared by stat, read_file, write_file, list_dir: slot args are cfg, id,
** path, [max_bytes | bytes]. */
static int fileop(lua_State *L, int opcode) {
  char root[LSB_PATH_MAX], path[LSB_PATH_MAX];
  const char *id, *p;
  lsb_box *box;
  local_meta m;
  lsb_view *v;
  lsb_fileop fo;
  fop_op *f;
  int pfd[2], rc;
  pid_t pid;
  luaL_checktype(L, 1, LUA_TTABLE);
  id = local_check_id(L, 2);
  p = luaL_checkstring(L, 3);
  lua_settop(L, 4);
  local_load_kept(L, 1, id, root, sizeof root, &box, &m, NULL, NULL,
                 NULL);                                  /* 5 box, 6 meta */
  if (lash_sandbox_path_join(m.workdir, p, path, sizeof path) != 0)
    lash_sandbox_raise(L, LASH_SB_ERROR, "invalid", "'%s': not a usable path",
                       p);
  v = local_build_view(L, root, &m, 1);                     /* 7 */
  lsb_box_close(box);
  memset(&fo, 0, sizeof fo);
  fo.op = opcode;
  fo.path = path;
  fo.uid = m.uid;
  fo.gid = m.gid;
  fo.drop = m.drop;
  if (opcode == LSB_OP_READ) fo.max_bytes = (uint64_t)luaL_checkinteger(L, 4);
  if (opcode == LSB_OP_WRITE) fo.data = luaL_checklstring(L, 4, &fo.len);
  f = lua_newuserdatauv(L, sizeof *f, 0);              /* 8 */
  memset(f, 0, sizeof *f);
  f->fd = -1;
  f->child.pidfd = -1;
  f->loop = lash_runtime_loop(L);
  f->op = opcode;
  f->max_bytes = fo.max_bytes;
  f->limit = opcode == LSB_OP_READ ? sizeof(lsb_reply) + fo.max_bytes + 1
           : opcode == LSB_OP_LIST ? LIST_MAX : sizeof(lsb_reply);
  if (luaL_newmetatable(L, FOP_MT)) {
    lua_pushcfunction(L, fop_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  lash_wait_init(&f->w, fop_cancel);
  if (pipe2(pfd, O_CLOEXEC) != 0)
    lash_sandbox_raise(L, LASH_SB_ERROR, "io", "pipe: %s", strerror(errno));
  pid = fork();
  if (pid < 0) {
    rc = errno;
    close(pfd[0]);
    close(pfd[1]);
    lash_sandbox_raise(L, LASH_SB_ERROR, "io", "fork: %s", strerror(rc));
  }
  if (pid == 0) {
    /* the helper: the jail's credentials, then the op; no heap, no Lua */
    close(pfd[0]);
    signal(SIGPIPE, SIG_DFL);
    if (fo.drop && (syscall(SYS_setgroups, 0, NULL) != 0 ||
                    syscall(SYS_setresgid, fo.gid, fo.gid, fo.gid) != 0 ||
                    syscall(SYS_setresuid, fo.uid, fo.uid, fo.uid) != 0))
      _exit(126);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    umask(022);
    _exit(lsb_fileop_child(v, &fo, pfd[1]));
  }
  close(pfd[1]);
  lsb_view_close(v);
  f->pid = pid;
  f->running = 1;
  f->fd = pfd[0];
  fcntl(f->fd, F_SETFL, O_NONBLOCK);
  if ((rc = lash_child_start(f->loop, &f->child, pid, fop_exited, f)) ||
      (rc = lash_io_start(f->loop, &f->io, f->fd, LASH_READ, fop_read, f))) {
    fop_teardown(f);
    lash_sandbox_raise(L, LASH_SB_ERROR, "io", "cannot watch the file "
                       "operation: %s", strerror(-rc));
  }
  return lash_wait_yield(L, &f->w, (lua_KContext)f, fop_k);
}

int local_stat(lua_State *L) { return fileop(L, LSB_OP_STAT); }
int local_read_file(lua_State *L) { return fileop(L, LSB_OP_READ); }
int local_write_file(lua_State *L) { return fileop(L, LSB_OP_WRITE); }
int local_list_dir(lua_State *L) { return fileop(L, LSB_OP_LIST); }

