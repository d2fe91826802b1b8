/*
** sandbox_local.c: the "local" sandbox backend (the slots of sandbox.h).
** A sandbox is a directory under the state root (sandbox_state.c); its
** commands run in one bubblewrap jail over its workspace (sandbox_jail.c),
** built at its first command and run by a supervisor inside it
** (sandbox_super.c, one per sandbox and lua_State), and every file
** operation in a helper child that sees the same view with the jail's
** credentials (sandbox_view.c). This file ties them to Lua and to the event
** loop: metadata as JSON (json.c), expiry checks, the exec op (pipes read
** into tail rings as output arrives, a deadline that kills the command and
** what it left behind, cancellation that does the same) and the file-op
** op, both waiting through lash_wait_yield.
**
** Resources held across Lua calls that may raise (locks, view fds) live
** in to-be-closed userdata, so an error never leaks them; ops that wait
** are userdata anchored on the waiting thread's stack whose __gc kills and
** reaps what they started.
*/
#include "sandbox.h"
#include "sandbox_local.h"
#include "sandbox_local_snapshot.h"
#include "sandbox_jaild.h"
#include "sandbox_super.h"
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

#define BOX_MT   "lash.sandbox.local.box"
#define VIEW_MT  "lash.sandbox.local.view"
#define EXEC_MT  "lash.sandbox.local.exec"
#define FOP_MT   "lash.sandbox.local.fileop"
#define SUPER_MT "lash.sandbox.local.supervisor"
#define SUPERS_KEY "lash.sandbox.local.supervisors"
#define PROBE_KEY "lash.sandbox.local.probe"

#define META_MAX (16u << 20)
#define LIST_MAX (64u << 20)
#define JAIL_UID 65534            /* nobody: the jail's host uid under root */
#define JAIL_GID 65534
#define DRAIN_NS (2000000000ull)  /* pipes kept open by an escaped process */
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

static const char *const create_options[] = {"rootfs", "limits", "isolation",
                                             NULL};
static const char *const config_options[] = {"state_root", "bwrap", NULL};

#define wall_now lash_sandbox_wall_now

/* ---- to-be-closed holders --------------------------------------------- */

static int box_close_mm(lua_State *L) {
  lsb_box_close(luaL_checkudata(L, 1, BOX_MT));
  return 0;
}

/* A new userdata of `size` bytes with metatable `mt` (whose __close and
** __gc both run `close`), marked to-be-closed so the stack releases it on
** return or error. */
static void *push_holder(lua_State *L, size_t size, const char *mt,
                         lua_CFunction close) {
  void *p = lua_newuserdatauv(L, size, 0);
  if (luaL_newmetatable(L, mt)) {
    lua_pushcfunction(L, close);
    lua_setfield(L, -2, "__close");
    lua_pushcfunction(L, close);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  return p;
}

/* A lock holder that the stack closes on return or error. */
static lsb_box *push_box(lua_State *L) {
  lsb_box *b = push_holder(L, sizeof *b, BOX_MT, box_close_mm);
  b->dirfd = b->lockfd = -1;
  lua_toclose(L, -1);
  return b;
}

static int view_close_mm(lua_State *L) {
  lsb_view_close(luaL_checkudata(L, 1, VIEW_MT));
  return 0;
}

static lsb_view *push_view(lua_State *L) {
  lsb_view *v = push_holder(L, sizeof *v, VIEW_MT, view_close_mm);
  v->n = 0;
  lua_toclose(L, -1);
  return v;
}

/* ---- config, ids, metadata ----------------------------------------------- */

/* The state root: the sandbox's own state_root option, else the embedding
** host's (lash_Options.state_root, kept in the registry by state.c), else
** lsb_state_root's defaults ($LASH_SANDBOX_ROOT, ...). */
static void find_root(lua_State *L, int cfg, char *out, size_t sz) {
  const char *conf = NULL;
  int rc, top = lua_gettop(L);
  if (lua_getfield(L, cfg, "state_root") != LUA_TNIL) {
    if (lua_type(L, -1) != LUA_TSTRING)
      luaL_error(L, "state_root must be a path string");
    conf = lua_tostring(L, -1);
  } else if (lua_getfield(L, LUA_REGISTRYINDEX, "lash.state_root") == LUA_TSTRING) {
    conf = lua_tostring(L, -1);
  }
  rc = lsb_state_root(conf, out, sz);
  lua_settop(L, top);
  if (rc)
    luaL_error(L, "cannot find a state root for local sandboxes (%s): set "
               "state_root, LASH_SANDBOX_ROOT or HOME", strerror(-rc));
}

static void reclaim(lua_State *L, const char *root);

/* The state root, as find_root, for an operation: opening a root reclaims
** what expired there a while ago (bounded; see reclaim). */
static void state_root(lua_State *L, int cfg, char *out, size_t sz) {
  find_root(L, cfg, out, sz);
  reclaim(L, out);
}

static const char *check_id(lua_State *L, int idx) {
  const char *id = luaL_checkstring(L, idx);
  if (!lsb_id_valid(id))
    lash_sandbox_raise(L, LASH_SB_UNAVAILABLE, "bad_id",
                       "'%s' is not a local sandbox id (they look like "
                       "lb- and 20 letters and digits)", id);
  return id;
}

/* Open and lock sandbox id; a sandbox that does not exist is terminal. */
static lsb_box *open_box(lua_State *L, const char *root, const char *id,
                         int exclusive) {
  lsb_box *b = push_box(L);
  int rc = lsb_box_open(root, id, exclusive, b);
  if (rc == -ENOENT)
    lash_sandbox_raise(L, LASH_SB_UNAVAILABLE, "gone",
                       "Sandbox '%s' is gone: it was destroyed (or reclaimed "
                       "after it expired), or it never existed under %s",
                       id, root);
  if (rc)
    lash_sandbox_raise(L, LASH_SB_ERROR, "io", "cannot open sandbox '%s' "
                       "under %s: %s", id, root, strerror(-rc));
  return b;
}

/* Push the decoded meta.json of the open box. */
static void meta_load(lua_State *L, lsb_box *b, const char *id) {
  char *data;
  size_t len;
  int rc = lsb_read_all(b->dirfd, "meta.json", META_MAX, &data, &len);
  if (rc)
    lash_sandbox_raise(L, LASH_SB_UNAVAILABLE, "gone", "cannot read the "
                       "metadata of sandbox '%s': %s", id, strerror(-rc));
  rc = lash_sandbox_json_decode(L, data, len);
  free(data);
  if (!rc || !lua_istable(L, -1))
    lash_sandbox_raise(L, LASH_SB_UNAVAILABLE, "corrupt", "the metadata of "
                       "sandbox '%s' is damaged; destroy it", id);
}

/* Write the table at idx as meta.json of the open box. */
static int meta_save(lua_State *L, lsb_box *b, int idx) {
  const char *s;
  size_t len;
  idx = lua_absindex(L, idx);
  lash_json_encode(L, idx, LASH_JSON_HASH_ORDER);
  s = lua_tolstring(L, -1, &len);
  {
    int rc = lsb_write_atomic(b->dirfd, "meta.json", s, len, 0600);
    lua_pop(L, 1);
    return rc;
  }
}

typedef struct meta {
  const char *id;
  char workdir[LSB_PATH_MAX];
  char rootfs[LSB_PATH_MAX];
  char bwrap[LSB_PATH_MAX];
  double expires_at;
  lua_Integer timeout;
  int network;            /* 1: on */
  int isolation_none;
  int disable_userns;
  int drop;               /* take uid/gid (lash runs as root) */
  uid_t uid;
  gid_t gid;
  lsb_limits limits;
} meta;

static const char *mstr(lua_State *L, int t, const char *k, char *out,
                        size_t sz) {
  if (lua_getfield(L, t, k) == LUA_TSTRING)
    snprintf(out, sz, "%s", lua_tostring(L, -1));
  else
    out[0] = '\0';
  lua_pop(L, 1);
  return out;
}

static double mnum(lua_State *L, int t, const char *k, double dflt) {
  double v = dflt;
  if (lua_getfield(L, t, k) == LUA_TNUMBER) v = lua_tonumber(L, -1);
  lua_pop(L, 1);
  return v;
}

static void meta_parse(lua_State *L, int t, const char *id, meta *m) {
  char iso[16];
  t = lua_absindex(L, t);
  memset(m, 0, sizeof *m);
  m->id = id;
  mstr(L, t, "workdir", m->workdir, sizeof m->workdir);
  mstr(L, t, "rootfs", m->rootfs, sizeof m->rootfs);
  mstr(L, t, "bwrap", m->bwrap, sizeof m->bwrap);
  mstr(L, t, "isolation", iso, sizeof iso);
  m->isolation_none = strcmp(iso, "none") == 0;
  m->expires_at = mnum(L, t, "expires_at", 0);
  m->timeout = (lua_Integer)mnum(L, t, "timeout", 0);
  {
    char net[8];
    mstr(L, t, "network", net, sizeof net);
    m->network = strcmp(net, "on") == 0;
  }
  lua_getfield(L, t, "disable_userns");
  m->disable_userns = lua_toboolean(L, -1);
  lua_pop(L, 1);
  m->uid = (uid_t)mnum(L, t, "uid", (double)getuid());
  m->gid = (gid_t)mnum(L, t, "gid", (double)getgid());
  m->drop = geteuid() == 0 && m->uid != 0;
  if (lua_getfield(L, t, "limits") == LUA_TTABLE) {
    int l = lua_gettop(L);
    m->limits.address_space = (uint64_t)mnum(L, l, "address_space", 0);
    m->limits.cpu_seconds = (uint64_t)mnum(L, l, "cpu_seconds", 0);
    m->limits.open_files = (uint64_t)mnum(L, l, "open_files", 0);
    m->limits.processes = (uint64_t)mnum(L, l, "processes", 0);
    m->limits.file_size = (uint64_t)mnum(L, l, "file_size", 0);
    m->limits.memory = (uint64_t)mnum(L, l, "memory", 0);
    m->limits.pids = (uint64_t)mnum(L, l, "pids", 0);
    m->limits.disk = (uint64_t)mnum(L, l, "disk", 0);
  }
  lua_pop(L, 1);
  if (!m->workdir[0] || !m->rootfs[0])
    lash_sandbox_raise(L, LASH_SB_UNAVAILABLE, "corrupt", "the metadata of "
                       "sandbox '%s' is damaged (no workdir or rootfs); "
                       "destroy it", id);
}

static void raise_expired(lua_State *L, const meta *m) {
  char when[64];
  time_t t = (time_t)m->expires_at;
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  lash_sandbox_raise(L, LASH_SB_UNAVAILABLE, "expired",
                     "Sandbox '%s' expired at %s (its lifetime was %I s); "
                     "create a new one (`lash sandbox gc` removes expired "
                     "sandboxes)", m->id, when, m->timeout);
}

/* Open id (shared lock), load and parse its metadata, refuse it expired.
** Pushes box (to-be-closed) and the meta table. */
static void load(lua_State *L, int cfg, const char *id, char *root,
                 size_t rootsz, lsb_box **box, meta *m, int exclusive) {
  state_root(L, cfg, root, rootsz);
  *box = open_box(L, root, id, exclusive);
  meta_load(L, *box, id);
  meta_parse(L, -1, id, m);
  if (wall_now() >= m->expires_at) raise_expired(L, m);
  {
    /* a disk quota's filesystem a reboot unmounted: back first */
    char bp[LSB_PATH_MAX + LSB_ID_LEN + 2], why[1024];
    int rc;
    snprintf(bp, sizeof bp, "%s/%s", root, id);
    if ((rc = lsb_disk_ensure((*box)->dirfd, bp, why, sizeof why)) != 0)
      lash_sandbox_raise(L, LASH_SB_UNAVAILABLE, "io", "sandbox '%s': %s", id,
                         why);
  }
}

static void box_path(lua_State *L, const char *root, const char *id,
                     char *out, size_t sz) {
  if ((size_t)snprintf(out, sz, "%s/%s", root, id) >= sz)
    luaL_error(L, "state root path too long");
}

/* Build the view of sandbox m (in root) into a to-be-closed userdata. */
static lsb_view *build_view(lua_State *L, const char *root, const meta *m,
                            int open_fds) {
  char box[LSB_PATH_MAX];
  lsb_layout lay;
  lsb_view *v = push_view(L);
  int rc;
  box_path(L, root, m->id, box, sizeof box);
  lay.box = box;
  lay.rootfs = m->rootfs;
  lay.workdir = m->workdir;
  lay.state_root = root;
  lay.isolation_none = m->isolation_none;
  rc = lsb_view_build(v, &lay);
  if (rc) luaL_error(L, "cannot build the sandbox's view: %s", strerror(-rc));
  if (open_fds && (rc = lsb_view_open(v)) != 0)
    lash_sandbox_raise(L, LASH_SB_ERROR, "io", "cannot open the directories "
                       "of sandbox '%s': %s", m->id, strerror(-rc));
  return v;
}

/* ---- probing bubblewrap ------------------------------------------------ */

/* Run bwrap once with a minimal jail; returns 1 when it ran, else 0 and the
** reason in msg. Blocking: a few milliseconds, once per state. */
static int try_bwrap(const char *bwrap, int disable_userns, char *msg,
                     size_t msgsz) {
  lsb_argv a;
  lsb_spawn sp;
  lsb_spawn_opts o;
  const char *stage;
  char *envp[] = {NULL};
  int status = 0, rc;
  size_t got = 0;
  lsb_argv_init(&a);
  lsb_argv_add(&a, bwrap);
  lsb_argv_add(&a, "--unshare-user");
  lsb_argv_add(&a, "--unshare-pid");
  lsb_argv_add(&a, "--unshare-net");
  lsb_argv_add(&a, "--unshare-ipc");
  if (disable_userns) lsb_argv_add(&a, "--disable-userns");
  lsb_argv_add(&a, "--die-with-parent");
  lsb_argv_add(&a, "--ro-bind");
  lsb_argv_add(&a, "/");
  lsb_argv_add(&a, "/");
  lsb_argv_add(&a, "--proc");
  lsb_argv_add(&a, "/proc");
  lsb_argv_add(&a, "--");
  lsb_argv_add(&a, bwrap);
  lsb_argv_add(&a, "--version");
  memset(&o, 0, sizeof o);
  o.path = bwrap;
  o.argv = a.v;
  o.envp = envp;
  o.drop = geteuid() == 0;
  o.uid = JAIL_UID;
  o.gid = JAIL_GID;
  o.outputs = 2;
  if (a.oom) {
    lsb_argv_free(&a);
    snprintf(msg, msgsz, "out of memory");
    return 0;
  }
  rc = lsb_spawn_child(&o, &sp, &stage);
  lsb_argv_free(&a);
  if (rc) {
    snprintf(msg, msgsz, "cannot run %s (%s: %s)", bwrap, stage, strerror(-rc));
    return 0;
  }
  /* drain stdout (a few bytes of version) so bwrap is not hit by SIGPIPE */
  fcntl(sp.out_fd, F_SETFL, 0);
  {
    char sink[256];
    ssize_t n;
    while ((n = read(sp.out_fd, sink, sizeof sink)) > 0 ||
           (n < 0 && errno == EINTR)) {}
  }
  close(sp.out_fd);
  fcntl(sp.err_fd, F_SETFL, 0);
  msg[0] = '\0';
  for (;;) {
    ssize_t n = read(sp.err_fd, msg + got, msgsz - 1 - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += (size_t)n;
    if (got >= msgsz - 1) break;
  }
  msg[got] = '\0';
  close(sp.err_fd);
  while (waitpid(sp.pid, &status, 0) < 0 && errno == EINTR) {}
  while (got && (msg[got - 1] == '\n')) msg[--got] = '\0';
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 1;
  if (!got) snprintf(msg, msgsz, "bwrap exited with status %d", status);
  return 0;
}

/* Push the probe result for this state: {ok =, reason =, bwrap =,
** disable_userns =}, computed once per bwrap path. */
static void probe(lua_State *L, int cfg) {
  char path[LSB_PATH_MAX], msg[1024];
  const char *want = NULL;
  int ok;
  if (cfg && lua_getfield(L, cfg, "bwrap") == LUA_TSTRING)
    want = lua_tostring(L, -1);
  if (cfg) lua_pop(L, 1);
  if (!want) want = getenv("LASH_BWRAP");
  if (!want || !*want) want = "bwrap";
  if (lua_getfield(L, LUA_REGISTRYINDEX, PROBE_KEY) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, PROBE_KEY);
  }
  if (lua_getfield(L, -1, want) == LUA_TTABLE) {
    lua_remove(L, -2);
    return;
  }
  lua_pop(L, 1);
  lua_createtable(L, 0, 4);
  if (lsb_find_exe(want, getenv("PATH"), path, sizeof path) != 0) {
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "ok");
    lua_pushfstring(L, "bubblewrap (%s) is not installed or not on PATH", want);
    lua_setfield(L, -2, "reason");
  } else {
    int du = 1;
    ok = try_bwrap(path, 1, msg, sizeof msg);
    if (!ok && strstr(msg, "disable-userns")) {   /* an older bwrap */
      du = 0;
      ok = try_bwrap(path, 0, msg, sizeof msg);
    }
    lua_pushboolean(L, ok);
    lua_setfield(L, -2, "ok");
    lua_pushstring(L, path);
    lua_setfield(L, -2, "bwrap");
    lua_pushboolean(L, du);
    lua_setfield(L, -2, "disable_userns");
    if (!ok) {
      lua_pushfstring(L, "bubblewrap cannot create a jail here%s: %s",
                      geteuid() == 0 ? " as uid 65534" : "", msg);
      lua_setfield(L, -2, "reason");
    }
  }
  lua_pushvalue(L, -1);
  lua_setfield(L, -3, want);
  lua_remove(L, -2);
}

static int local_probe(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  probe(L, 1);
  lua_getfield(L, -1, "ok");
  if (lua_toboolean(L, -1)) {
    lua_pushboolean(L, 1);
    return 1;
  }
  lua_pushboolean(L, 0);
  lua_getfield(L, -3, "reason");
  return 2;
}

/* ---- create --------------------------------------------------------------- */

static const char *const limit_names[] = {
  "address_space", "cpu_seconds", "open_files", "processes", "file_size",
  "memory", "pids", "disk", NULL
};
#define N_LIMITS 8
#define LIMIT_MEMORY 5   /* the cgroup ones: enforced or refused */
#define LIMIT_PIDS 6
#define LIMIT_DISK 7     /* a filesystem of its own: made or refused */

/* Push the limits table of the sandbox: defaults overridden by spec.limits
** (a positive integer, or false to inherit lash's own limit). explicit[i]
** is set for the names the spec gave a number. */
static void check_limits(lua_State *L, int spec, int explicit[N_LIMITS]) {
  lsb_limits d;
  uint64_t vals[N_LIMITS];
  int i;
  lsb_limits_default(&d);
  vals[0] = d.address_space;
  vals[1] = d.cpu_seconds;
  vals[2] = d.open_files;
  vals[3] = d.processes;
  vals[4] = d.file_size;
  vals[5] = d.memory;
  vals[6] = d.pids;
  vals[7] = d.disk;
  memset(explicit, 0, N_LIMITS * sizeof *explicit);
  if (lua_getfield(L, spec, "limits") != LUA_TNIL) {
    int t = lua_gettop(L);
    if (!lua_istable(L, t))
      luaL_error(L, "limits must be a table (address_space, cpu_seconds, "
                 "open_files, processes, file_size, memory, pids, disk)");
    lua_pushnil(L);
    while (lua_next(L, t)) {
      const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
      int found = 0;
      for (i = 0; limit_names[i]; i++) {
        if (strcmp(k, limit_names[i]) != 0) continue;
        found = 1;
        if (lua_isboolean(L, -1) && !lua_toboolean(L, -1)) vals[i] = 0;
        else if (lua_isinteger(L, -1) && lua_tointeger(L, -1) > 0)
          vals[i] = (uint64_t)lua_tointeger(L, -1), explicit[i] = 1;
        else if (lua_type(L, -1) == LUA_TNUMBER && lua_tonumber(L, -1) >= 1 &&
                 lua_tonumber(L, -1) == floor(lua_tonumber(L, -1)))
          vals[i] = (uint64_t)lua_tonumber(L, -1), explicit[i] = 1;
        else
          luaL_error(L, "limits.%s must be a positive integer (or false to "
                     "keep lash's own limit), got %s", k, luaL_tolstring(L, -1, NULL));
      }
      if (!found)
        luaL_error(L, "limits has an unknown field '%s' (it takes "
                   "address_space, cpu_seconds, open_files, processes, "
                   "file_size, memory, pids, disk)", k);
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
  if (explicit[LIMIT_DISK] && vals[LIMIT_DISK] < (16u << 20))
    luaL_error(L, "limits.disk must be at least 16 MiB (16777216); got %I",
               (lua_Integer)vals[LIMIT_DISK]);
  if (explicit[LIMIT_MEMORY] && vals[LIMIT_MEMORY] < (16u << 20))
    luaL_error(L, "limits.memory must be at least 16 MiB (16777216); got %I",
               (lua_Integer)vals[LIMIT_MEMORY]);
  lua_createtable(L, 0, N_LIMITS);
  for (i = 0; limit_names[i]; i++) {
    lua_pushinteger(L, (lua_Integer)vals[i]);
    lua_setfield(L, -2, limit_names[i]);
  }
}

/* The workdir must be creatable by bwrap: outside the rootfs's directories
** (bwrap makes it in its tmpfs root or in a mask), or already there. */
static void check_workdir(lua_State *L, const char *workdir,
                          const char *rootfs, const char *root) {
  static const char *const refused[] = {"/proc", "/dev", "/sys", "/tmp", NULL};
  char hp[2 * LSB_PATH_MAX], first[2 * LSB_PATH_MAX];
  struct stat st;
  int i, host = strcmp(rootfs, "/") == 0;
  const char *slash;
  if (strcmp(workdir, "/") == 0)
    luaL_error(L, "workdir cannot be / (the rootfs is read-only); use a "
               "directory such as /workspace");
  for (i = 0; refused[i]; i++)
    if (lsb_path_under(workdir, refused[i]))
      luaL_error(L, "workdir cannot be under %s (the jail mounts its own "
                 "there); use a directory such as /workspace", refused[i]);
  if (host && lsb_path_under(workdir, root))
    luaL_error(L, "workdir cannot be inside the state root %s", root);
  /* masked trees (/home, /root, ...) become writable tmpfs in the jail */
  if (host) {
    static const char *const masked[] = {"/root", "/home", "/run",
                                         "/var/tmp", NULL};
    for (i = 0; masked[i]; i++)
      if (lsb_path_under(workdir, masked[i])) return;
  }
  snprintf(hp, sizeof hp, "%s%s", host ? "" : rootfs, workdir);
  if (stat(hp, &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      luaL_error(L, "workdir %s exists in the rootfs and is not a directory",
                 workdir);
    return;
  }
  slash = strchr(workdir + 1, '/');
  snprintf(first, sizeof first, "%s%.*s", host ? "" : rootfs,
           slash ? (int)(slash - workdir) : (int)strlen(workdir), workdir);
  if (lstat(first, &st) == 0) {
    char top[LSB_PATH_MAX];
    snprintf(top, sizeof top, "%.*s",
             slash ? (int)(slash - workdir) : (int)strlen(workdir), workdir);
    luaL_error(L, "workdir %s does not exist in the rootfs, and lash cannot "
               "create it under the read-only %s; use a path that exists "
               "there, or one outside it such as /workspace", workdir, top);
  }
}

/* Candidates for a sandbox's host uid: the one drawn first, then random
** ones in the reserved range. */
typedef struct uid_draw {
  uint32_t first;
  int n;
} uid_draw;

static uint32_t uid_next(void *ud) {
  uid_draw *d = ud;
  uint32_t r = 0;
  if (d->n++ == 0) return d->first;
  if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
    r = (uint32_t)getpid() * 2654435761u ^ (uint32_t)d->n;
  return LSB_UID_BASE + r % LSB_UID_RANGE;
}

/* Give box b its cgroup (see sandbox_cgroup.c) with the limits of the meta
** table; save it in the box. Where none can be made: limits the caller
** asked for are refused (returns -1 with the message in why); defaults fall
** back, with a warning once per state. */
static int create_cgroup(lua_State *L, const char *id, const char *path,
                         lsb_box *b, int meta_idx, const int explicit[N_LIMITS],
                         lsb_cgroup *cg, char *why, size_t whysz) {
  uint64_t pids, memory;
  char reason[1024];
  int rc;
  lua_getfield(L, meta_idx, "limits");
  pids = (uint64_t)mnum(L, -1, "pids", 0);
  memory = (uint64_t)mnum(L, -1, "memory", 0);
  lua_pop(L, 1);
  if (!pids && !memory) {
    /* nothing to bound: no group either */
    memset(cg, 0, sizeof *cg);
    return 0;
  }
  rc = lsb_cgroup_setup(id, pids, memory, cg, reason, sizeof reason);
  if (!rc) rc = lsb_cgroup_save(b->dirfd, cg, pids, memory);
  if (!rc) {
    lua_pushstring(L, cg->version == 2 ? "v2" : "v1");
    lua_setfield(L, meta_idx, "cgroup");
    /* listed, then the groups of sandboxes that vanished without a destroy */
    lsb_cgroup_register(id, path);
    lsb_cgroup_sweep(cg);
    return 0;
  }
  if (cg->version) {
    snprintf(reason, sizeof reason, "cannot record the sandbox's cgroup: %s",
             strerror(-rc));
    lsb_cgroup_remove(cg);
    memset(cg, 0, sizeof *cg);
  }
  if (explicit[LIMIT_MEMORY] || explicit[LIMIT_PIDS]) {
    snprintf(why, whysz, "limits.%s needs a cgroup of the sandbox's own, and "
             "lash cannot make one here: %s. Run lash where it can write "
             "cgroups (as root, or with a delegated cgroup v2 subtree in "
             "LASH_CGROUP_ROOT), or pass --limit %s=none to rely on the "
             "rlimits (address_space, processes) and the sandbox's own uid",
             explicit[LIMIT_MEMORY] ? "memory" : "pids", reason,
             explicit[LIMIT_MEMORY] ? "memory" : "pids");
    return -1;
  }
  lua_pushstring(L, "none");
  lua_setfield(L, meta_idx, "cgroup");
  lua_getfield(L, LUA_REGISTRYINDEX, "lash.sandbox.local.cgroup_warned");
  if (!lua_toboolean(L, -1)) {
    lash_runtime_log(lash_runtime_get(L), LASH_LOG_WARN,
                     "local sandboxes get no cgroup of their own (%s): their "
                     "memory is bounded only per process (limits.address_space)"
                     " and their processes by the per-uid count "
                     "(limits.processes)", reason);
    lua_pushboolean(L, 1);
    lua_setfield(L, LUA_REGISTRYINDEX, "lash.sandbox.local.cgroup_warned");
  }
  lua_pop(L, 1);
  return 0;
}

static int local_create(lua_State *L) {
  char root[LSB_PATH_MAX], id[LSB_ID_LEN + 1], where[2 * LSB_PATH_MAX];
  char rootfs[LSB_PATH_MAX], ws_host[2 * LSB_PATH_MAX];
  const char *workdir, *iso = "bwrap", *bwrap_path = NULL, *netmode = "off", *from = NULL;
  int none, rc, tries, du = 1, meta_idx, spec = 2, own_uid = 0;
  int explicit[N_LIMITS];
  uint64_t disk = 0;
  lsb_cgroup cg;
  uid_t uid = getuid();
  gid_t gid = getgid();
  lsb_box *b;
  const char *json;
  size_t json_len;
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checktype(L, 2, LUA_TTABLE);
  state_root(L, 1, root, sizeof root);
  /* from_snapshot: checked now, copied in once the workspace exists */
  if (lua_getfield(L, spec, "from_snapshot") != LUA_TNIL) {
    struct stat st;
    from = lua_tostring(L, -1);   /* alive in spec */
    if (lsb_snapshot_path(root, from, where, sizeof where) != 0 ||
        stat(where, &st) != 0 || !S_ISDIR(st.st_mode))
      lash_sandbox_raise(L, LASH_SB_ERROR, "not_found", "no local snapshot '%s' under %s "
                         "(`lash sandbox snapshot ID` prints one)", from, root);
  }
  lua_pop(L, 1);
  /* isolation */
  if (lua_getfield(L, spec, "isolation") != LUA_TNIL) {
    iso = lua_tostring(L, -1);
    if (!iso || (strcmp(iso, "bwrap") && strcmp(iso, "none")))
      luaL_error(L, "isolation must be \"bwrap\" (default) or \"none\"");
  }
  lua_pop(L, 1);
  none = strcmp(iso, "none") == 0;
  /* rootfs */
  if (lua_getfield(L, spec, "rootfs") != LUA_TNIL) {
    struct stat st;
    const char *r = lua_tostring(L, -1);
    if (!r || r[0] != '/' || lash_sandbox_path_normalize(r, rootfs, sizeof rootfs))
      luaL_error(L, "rootfs must be an absolute path to a directory");
    if (stat(rootfs, &st) != 0 || !S_ISDIR(st.st_mode))
      luaL_error(L, "rootfs %s is not a directory", rootfs);
    if (none)
      luaL_error(L, "isolation = \"none\" cannot use a rootfs: without a "
                 "jail commands see the host's filesystem");
  } else {
    strcpy(rootfs, "/");
  }
  lua_pop(L, 1);
  /* network: bubblewrap can switch it off or share it, nothing between */
  lua_getfield(L, spec, "network");
  {
    int block, lists;
    lua_getfield(L, -1, "block_network");
    block = lua_toboolean(L, -1);
    lua_getfield(L, -2, "allow_egress_to");
    lua_getfield(L, -3, "allow_egress_to_cidrs");
    lists = lua_rawlen(L, -1) + lua_rawlen(L, -2) > 0;
    lua_pop(L, 4);
    if (lists)
      lash_sandbox_raise(L, LASH_SB_ERROR, "unsupported",
                         "the local backend cannot enforce an egress "
                         "allow-list (bubblewrap has no per-host filter); use "
                         "network = \"off\" or \"on\"");
    if (none && block)
      lash_sandbox_raise(L, LASH_SB_ERROR, "unsupported",
                         "isolation = \"none\" cannot switch the network off "
                         "(there is no network namespace); pass network = "
                         "\"on\" to accept that");
    netmode = block ? "off" : "on";
  }
  lua_getfield(L, spec, "workdir");
  workdir = lua_tostring(L, -1);
  if (!workdir) luaL_error(L, "workdir missing");
  if (none && strcmp(workdir, "/workspace") != 0)
    lash_sandbox_raise(L, LASH_SB_ERROR, "unsupported",
                       "isolation = \"none\" runs commands in the workspace "
                       "directory itself (on the host); workdir cannot be "
                       "set");
  if (!none) check_workdir(L, workdir, rootfs, root);
  /* credentials: as root, the jail holds no host privilege */
  if (geteuid() == 0) {
    uid = JAIL_UID;
    gid = JAIL_GID;
  }
  if (!none) {
    probe(L, 1);
    lua_getfield(L, -1, "ok");
    if (!lua_toboolean(L, -1)) {
      lua_getfield(L, -2, "reason");
      lash_sandbox_raise(
          L, LASH_SB_UNAVAILABLE, "no_isolation",
          "%s. Install bubblewrap and allow unprivileged user namespaces "
          "(sysctl user.max_user_namespaces, "
          "kernel.apparmor_restrict_unprivileged_userns=0), or pass "
          "isolation = \"none\" to run commands as a plain process group on "
          "the host, without isolation", lua_tostring(L, -1));
    }
    lua_pop(L, 1);
    lua_getfield(L, -1, "bwrap");
    bwrap_path = lua_tostring(L, -1);
    lua_getfield(L, -2, "disable_userns");
    du = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  /* the metadata, built before anything exists on disk */
  if ((rc = lsb_id_new(id)) != 0)
    luaL_error(L, "cannot generate an id: %s", strerror(-rc));
  if (geteuid() != 0 && !none) {
    /* no uid of its own without root: say so, once per state */
    lua_getfield(L, LUA_REGISTRYINDEX, "lash.sandbox.local.shared_uid_warned");
    if (!lua_toboolean(L, -1)) {
      lash_runtime_log(lash_runtime_get(L), LASH_LOG_WARN,
                       "local sandboxes of uid %d share that uid's process "
                       "count (RLIMIT_NPROC): a fork bomb in one can stop "
                       "commands in the others and in your session. Run lash "
                       "as root to give each sandbox a uid of its own",
                       (int)getuid());
      lua_pushboolean(L, 1);
      lua_setfield(L, LUA_REGISTRYINDEX, "lash.sandbox.local.shared_uid_warned");
    }
    lua_pop(L, 1);
  }
  if (geteuid() == 0 && !none) {
    /* a host uid of its own (see LSB_UID_BASE), picked at random */
    uint32_t r = 0;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) r = (uint32_t)getpid() ^ (uint32_t)time(NULL);
    uid = (uid_t)(LSB_UID_BASE + r % LSB_UID_RANGE);
    gid = (gid_t)uid;
    own_uid = 1;     /* reserved once the box exists (below) */
  }
  lua_createtable(L, 0, 16);
  meta_idx = lua_gettop(L);
  lua_pushinteger(L, 1);
  lua_setfield(L, meta_idx, "version");
  lua_pushnumber(L, floor(wall_now()));
  lua_setfield(L, meta_idx, "created_at");
  lua_getfield(L, spec, "expires_at");
  lua_setfield(L, meta_idx, "expires_at");
  lua_getfield(L, spec, "timeout");
  lua_setfield(L, meta_idx, "timeout");
  lua_getfield(L, spec, "env");
  lua_setfield(L, meta_idx, "env");
  lua_pushstring(L, iso);
  lua_setfield(L, meta_idx, "isolation");
  lua_pushstring(L, rootfs);
  lua_setfield(L, meta_idx, "rootfs");
  lua_pushstring(L, netmode);
  lua_setfield(L, meta_idx, "network");
  if (bwrap_path) {
    lua_pushstring(L, bwrap_path);
    lua_setfield(L, meta_idx, "bwrap");
  }
  lua_pushboolean(L, du);
  lua_setfield(L, meta_idx, "disable_userns");
  lua_pushinteger(L, (lua_Integer)uid);
  lua_setfield(L, meta_idx, "uid");
  lua_pushinteger(L, (lua_Integer)gid);
  lua_setfield(L, meta_idx, "gid");
  check_limits(L, spec, explicit);
  lua_getfield(L, -1, "disk");
  disk = (uint64_t)lua_tointeger(L, -1);
  lua_pop(L, 1);
  lua_setfield(L, meta_idx, "limits");
  if (disk && !lsb_disk_usable(where, sizeof where))
    lash_sandbox_raise(L, LASH_SB_ERROR, "unsupported", "limits.disk needs a "
                       "filesystem of the sandbox's own, and lash cannot make "
                       "one here: %s. Run lash as root on a machine with loop "
                       "devices, or leave --limit disk out (the workspace and "
                       "/tmp then share the state root's filesystem; each file "
                       "stays under limits.file_size)", where);
  lua_getfield(L, spec, "tags");
  lua_setfield(L, meta_idx, "tags");
  /* create the state root; the jail's uid must be able to reach it */
  if ((rc = lsb_mkdirs(root, 0711)) != 0)
    lash_sandbox_raise(L, LASH_SB_ERROR, "io", "cannot create the state root "
                       "%s: %s", root, strerror(-rc));
  if (!none && uid != geteuid() && !lsb_traversable(root, uid, gid, where,
                                                     sizeof where))
    lash_sandbox_raise(L, LASH_SB_ERROR, "io",
                       "the jail runs as uid %d (lash runs as root) and cannot "
                       "reach the state root %s (%s is not searchable by "
                       "it); use a state root under searchable directories "
                       "(state_root, LASH_SANDBOX_ROOT), e.g. "
                       "/var/lib/lash/sandboxes", (int)uid, root, where);
  /* the box: workspace and tmp owned by the jail's uid */
  b = push_box(L);
  for (tries = 0;; tries++) {
    rc = lsb_box_create(root, id, b);
    if (rc != -EEXIST || tries > 5) break;
    lsb_id_new(id);
  }
  if (rc)
    lash_sandbox_raise(L, LASH_SB_ERROR, "io", "cannot create a sandbox under "
                       "%s: %s", root, strerror(-rc));
  snprintf(where, sizeof where, "%s/%s", root, id);
  if (own_uid) {
    /* a uid no account, process or other sandbox holds */
    uid_draw d;
    d.first = (uint32_t)uid;
    d.n = 0;
    rc = lsb_uid_reserve(LSB_UID_DIR, where, uid_next, &d, &uid);
    if (rc) {
      lsb_box_close(b);
      lsb_rmtree_at(AT_FDCWD, where);
      lash_sandbox_raise(L, LASH_SB_ERROR, "io", "cannot reserve a host uid "
                         "for the sandbox under %s: %s", LSB_UID_DIR,
                         strerror(-rc));
    }
    gid = (gid_t)uid;
    lua_pushinteger(L, (lua_Integer)uid);
    lua_setfield(L, meta_idx, "uid");
    lua_pushinteger(L, (lua_Integer)gid);
    lua_setfield(L, meta_idx, "gid");
    {
      char u[24];
      int n = snprintf(u, sizeof u, "%u\n", (unsigned)uid);
      lsb_write_atomic(b->dirfd, "uid", u, (size_t)n, 0600);
    }
  }
  {
    char why[2048];
    if (create_cgroup(L, id, where, b, meta_idx, explicit, &cg, why,
                      sizeof why)) {
      lsb_box_close(b);
      if (own_uid) lsb_uid_release(LSB_UID_DIR, uid, where);
      lsb_rmtree_at(AT_FDCWD, where);
      lash_sandbox_raise(L, LASH_SB_ERROR, "unsupported", "%s", why);
    }
  }
  if (none) {
    snprintf(ws_host, sizeof ws_host, "%s/%s/workspace", root, id);
    lua_pushstring(L, ws_host);
    lua_setfield(L, meta_idx, "workdir");
    lua_getfield(L, meta_idx, "tags");
    lua_pushstring(L, ws_host);
    lua_setfield(L, -2, LASH_SB_TAG_WORKDIR);
    lua_pop(L, 1);
  } else {
    lua_pushstring(L, workdir);
    lua_setfield(L, meta_idx, "workdir");
  }
  lua_pushstring(L, id);
  lua_setfield(L, meta_idx, "id");
  /* encode before touching the disk further, so no Lua error can strike
  ** between here and the rollback below */
  if (!lash_sandbox_json_encode(L, meta_idx, 0)) {
    snprintf(where, sizeof where, "%s/%s", root, id);
    lsb_box_close(b);
    if (cg.version && lsb_cgroup_remove(&cg) == 0) lsb_cgroup_unregister(id);
    if (own_uid) lsb_uid_release(LSB_UID_DIR, uid, where);
    lsb_rmtree_at(AT_FDCWD, where);
    lua_error(L);
  }
  json = lua_tolstring(L, -1, &json_len);
  rc = 0;
  if (mkdirat(b->dirfd, "workspace", 0700) != 0 ||
      mkdirat(b->dirfd, "tmp", 0700) != 0)
    rc = -errno;
  if (!rc && geteuid() == 0 &&
      (fchownat(b->dirfd, "workspace", uid, gid, AT_SYMLINK_NOFOLLOW) != 0 ||
       fchownat(b->dirfd, "tmp", uid, gid, AT_SYMLINK_NOFOLLOW) != 0))
    rc = -errno;
  if (!rc && disk) {
    /* the disk quota: workspace and tmp in a filesystem of that size */
    char bp[LSB_PATH_MAX + LSB_ID_LEN + 2], why[1024];
    snprintf(bp, sizeof bp, "%s/%s", root, id);
    why[0] = '\0';
    rc = lsb_disk_create(bp, disk, uid, gid, why, sizeof why);
    if (rc) lash_runtime_log(lash_runtime_get(L), LASH_LOG_WARN, "sandbox %s: "
                             "limits.disk: %s", id, why[0] ? why : strerror(-rc));
  }
  if (!rc && from) {
    snprintf(ws_host, sizeof ws_host, "%s/%s/workspace", root, id);
    rc = lsb_snapshot_restore(root, from, ws_host, uid, gid, where, sizeof where);
    if (rc) lash_runtime_log(lash_runtime_get(L), LASH_LOG_WARN, "%s", where);
  }
  if (!rc) rc = lsb_write_atomic(b->dirfd, "meta.json", json, json_len, 0600);
  if (rc) {
    snprintf(where, sizeof where, "%s/%s", root, id);
    lsb_box_close(b);
    if (cg.version && lsb_cgroup_remove(&cg) == 0) lsb_cgroup_unregister(id);
    if (own_uid) lsb_uid_release(LSB_UID_DIR, uid, where);
    lsb_disk_release(where);
    lsb_rmtree_at(AT_FDCWD, where);
    lash_sandbox_raise(L, LASH_SB_ERROR, "io", "cannot create sandbox files "
                       "under %s: %s", root, strerror(-rc));
  }
  lsb_box_close(b);
  if (none)
    lash_runtime_log(lash_runtime_get(L), LASH_LOG_WARN,
                     "sandbox %s has no isolation (isolation = \"none\"): its "
                     "commands run on the host as %s, in a process group in "
                     "%s", id, geteuid() == 0 ? "uid 65534" : "you", ws_host);
  lua_pushstring(L, id);
  return 1;
}

static int local_snapshot(lua_State *L) {
  char root[LSB_PATH_MAX];
  lsb_box *box;
  meta m;
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 2);
  /* gone and expired sandboxes are refused as by every operation */
  load(L, 1, check_id(L, 2), root, sizeof root, &box, &m, 0);
  (void)box;
  return lsb_snapshot_slot(L, root);   /* the shared lock is held meanwhile */
}

/* ---- exec -------------------------------------------------------------------- */

typedef struct exec_op {
  lash_wait w;
  lash_loop *loop;
  lash_child child;
  lash_io out_io, err_io, in_io;
  lash_timer deadline, drain;
  int out_fd, err_fd, in_fd;
  lash_ring out, err;
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
  char cwd[LSB_PATH_MAX];   /* for the start error */
} exec_op;

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

static void exec_stop_io(exec_op *op) {
  if (op->out_io.active) lash_io_stop(op->loop, &op->out_io);
  if (op->err_io.active) lash_io_stop(op->loop, &op->err_io);
  if (op->in_io.active) lash_io_stop(op->loop, &op->in_io);
  close_fd(&op->out_fd);
  close_fd(&op->err_fd);
  close_fd(&op->in_fd);
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
        close_fd(fd);
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
      lash_ring_feed(r, buf, (size_t)n);   /* ENOMEM: drop this chunk */
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    break;                                 /* EOF or error */
  }
  lash_io_stop(loop, io);
  close_fd(fd);
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
  close_fd(&op->in_fd);
}

static void exec_drained(lash_loop *loop, lash_timer *t) {
  exec_op *op = t->data;
  (void)loop;
  /* something that escaped the kill still holds the pipes: stop waiting */
  if (op->out_io.active) lash_io_stop(op->loop, &op->out_io);
  if (op->err_io.active) lash_io_stop(op->loop, &op->err_io);
  close_fd(&op->out_fd);
  close_fd(&op->err_fd);
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
  if (lua_getfield(L, metat, "env") == LUA_TTABLE) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      lua_pushvalue(L, -2);
      lua_insert(L, -2);
      lua_rawset(L, t);
    }
  }
  lua_pop(L, 1);
  if (lua_getfield(L, opts, "env") == LUA_TTABLE) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      lua_pushvalue(L, -2);
      lua_insert(L, -2);
      lua_rawset(L, t);
    }
  }
  lua_pop(L, 1);
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
static void spawn_opts_for(lsb_spawn_opts *so, const meta *m) {
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
static void stop_super(lua_State *L, const char *root, const char *id) {
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
static lsb_super *ensure_super(lua_State *L, const char *root, const meta *m,
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
  v = build_view(L, root, m, 0);
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

static int local_exec(lua_State *L) {
  char root[LSB_PATH_MAX], cwd[LSB_PATH_MAX], exe[LSB_PATH_MAX];
  const char *id;
  lsb_box *box;
  meta m;
  int metat, envt, rc;
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
  luaL_checktype(L, 1, LUA_TTABLE);
  id = check_id(L, 2);
  luaL_checktype(L, 3, LUA_TTABLE);
  luaL_checktype(L, 4, LUA_TTABLE);
  lua_settop(L, 4);
  load(L, 1, id, root, sizeof root, &box, &m, 0);   /* 5 box, 6 meta */
  metat = 6;
  rc = lsb_cgroup_load(box->dirfd, id, &cg, &cg_pids, &cg_memory);
  if (rc && rc != -ENOENT)
    lash_sandbox_raise(L, LASH_SB_UNAVAILABLE, "corrupt", "the cgroup record "
                       "of sandbox '%s' is damaged (%s); destroy it", id,
                       strerror(-rc));
  lua_getfield(L, 4, "timeout");
  timeout = lua_tointeger(L, -1);
  lua_getfield(L, 4, "max_output_bytes");
  maxout = lua_tointeger(L, -1);
  lua_pop(L, 2);
  /* never past the sandbox's own end */
  applied = lash_sandbox_deadline(timeout, m.expires_at, 0);
  /* cwd, relative to the workdir */
  if (lua_getfield(L, 4, "cwd") == LUA_TSTRING) {
    if (lash_sandbox_path_join(m.workdir, lua_tostring(L, -1), cwd, sizeof cwd) != 0)
      luaL_error(L, "cwd is too long");
  } else {
    snprintf(cwd, sizeof cwd, "%s", m.workdir);
  }
  lua_pop(L, 1);
  if (m.isolation_none && !lsb_path_under(cwd, m.workdir))
    lash_sandbox_raise(L, LASH_SB_ERROR, "denied", "cwd %s is outside the "
                       "workspace %s (isolation = \"none\" exposes only the "
                       "workspace)", cwd, m.workdir);
  envt = exec_env(L, metat, 4, m.workdir);
  /* the op: anchored on this stack until the wait ends */
  op = lua_newuserdatauv(L, sizeof *op, 0);
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
  if (lua_getfield(L, 4, "stdin") == LUA_TSTRING)
    op->in_data = lua_tolstring(L, -1, &op->in_len);
  lua_pop(L, 1);
  /* the jail, built at the sandbox's first command (may raise) */
  if (!m.isolation_none)
    sup = ensure_super(L, root, &m, box, &cg, cg_pids, cg_memory);
  /* command lines, all C memory from here on: freed before any raise */
  lsb_argv_init(&argv);
  lsb_argv_init(&envs);
  command_strings(L, 3, envt, &argv, &envs);
  spawn_opts_for(&so, &m);
  so.want_stdin = op->in_data != NULL;
  so.outputs = 2;
  rc = 0;
  if (m.isolation_none) {
    const char *path = NULL;
    lua_getfield(L, envt, "PATH");
    path = lua_tostring(L, -1);
    lua_pop(L, 1);   /* still anchored in envt */
    rc = lsb_find_exe(argv.v[0], path, exe, sizeof exe);
    so.path = exe;
    so.argv = argv.v;
    so.envp = envs.v;
    so.chdir = cwd;
    so.new_session = 1;
    op->group = 1;
    if (rc) stage = "find";
    if (!rc && cg.version) {
      /* into the sandbox's group, or not at all: its limits must hold */
      rc = lsb_cgroup_open(&cg, cg_pids, cg_memory, so.cgroup_fds);
      if (rc) stage = "joining the sandbox's cgroup";
      so.join_cgroup = 1;
    }
  } else {
    /* the pipes go to the jail's supervisor, which runs the command */
    op->jailed = 1;
    op->sc.started = exec_sup_started;
    op->sc.exited = exec_sup_exited;
    snprintf(op->cwd, sizeof op->cwd, "%s", cwd);
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
    close_fd(&inp[0]);
    close_fd(&outp[1]);
    close_fd(&errp[1]);
    if (rc) {
      close_fd(&inp[1]);
      close_fd(&outp[0]);
      close_fd(&errp[0]);
    }
    sp.pid = -1;
    sp.in_fd = inp[1];
    sp.out_fd = outp[0];
    sp.err_fd = errp[0];
    if (sp.in_fd >= 0) fcntl(sp.in_fd, F_SETFL, O_NONBLOCK);
    if (sp.out_fd >= 0) fcntl(sp.out_fd, F_SETFL, O_NONBLOCK);
    if (sp.err_fd >= 0) fcntl(sp.err_fd, F_SETFL, O_NONBLOCK);
  }
  if (!rc && !op->jailed) rc = lsb_spawn_child(&so, &sp, &stage);
  lsb_cgroup_close(so.cgroup_fds);
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
static int local_spawn(lua_State *L) {
  char root[LSB_PATH_MAX], cwd[LSB_PATH_MAX], exe[LSB_PATH_MAX];
  const char *id, *stage = NULL;
  lsb_box *box;
  meta m;
  int envt, rc = 0, i, argsfd = -1, infop[2] = {-1, -1};
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
  luaL_checktype(L, 1, LUA_TTABLE);
  id = check_id(L, 2);
  luaL_checktype(L, 3, LUA_TTABLE);
  luaL_checktype(L, 4, LUA_TTABLE);
  lua_settop(L, 4);
  load(L, 1, id, root, sizeof root, &box, &m, 0);   /* 5 box, 6 meta */
  rc = lsb_cgroup_load(box->dirfd, id, &cg, &cg_pids, &cg_memory);
  if (rc && rc != -ENOENT)
    lash_sandbox_raise(L, LASH_SB_UNAVAILABLE, "corrupt", "the cgroup record "
                       "of sandbox '%s' is damaged (%s); destroy it", id,
                       strerror(-rc));
  rc = 0;
  handle = lash_proc_push_empty(L);                 /* 7: owns the child */
  if (lua_getfield(L, 4, "cwd") == LUA_TSTRING) {
    if (lash_sandbox_path_join(m.workdir, lua_tostring(L, -1), cwd, sizeof cwd) != 0)
      luaL_error(L, "cwd is too long");
  } else {
    snprintf(cwd, sizeof cwd, "%s", m.workdir);
  }
  lua_pop(L, 1);
  if (m.isolation_none && !lsb_path_under(cwd, m.workdir))
    lash_sandbox_raise(L, LASH_SB_ERROR, "denied", "cwd %s is outside the "
                       "workspace %s (isolation = \"none\" exposes only the "
                       "workspace)", cwd, m.workdir);
  envt = exec_env(L, 6, 4, m.workdir);
  if (!m.isolation_none) v = build_view(L, root, &m, 0);
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
    const char *path;
    lua_getfield(L, envt, "PATH");
    path = lua_tostring(L, -1);
    lua_pop(L, 1);
    if (!rc && (rc = lsb_find_exe(argv.v[0], path, exe, sizeof exe)) != 0)
      stage = "find";
    so.path = exe;
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
  close_fd(&f->fd);
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
  close_fd(&f->fd);
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
                      const meta *m) {
  switch (r->status) {
  case LSB_E_NOTFOUND:
    lash_sandbox_raise(L, LASH_SB_ERROR, "not_found", "'%s': No such file or "
                       "directory", path);
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
    lash_sandbox_raise(L, LASH_SB_ERROR, "not_dir", "'%s': Not a directory",
                       path);
    break;
  case LSB_E_ISDIR:
    lash_sandbox_raise(L, LASH_SB_ERROR, "is_dir", "'%s' is a directory",
                       path);
    break;
  case LSB_E_TOOLARGE:
    lash_sandbox_raise_too_large(L, path, (lua_Integer)r->a, (lua_Integer)r->b,
                                 NULL);
    break;
  case LSB_E_NOTREG:
    lash_sandbox_raise(L, LASH_SB_ERROR, "not_regular", "'%s' is not a "
                       "regular file", path);
    break;
  case LSB_E_LOOP:
    lash_sandbox_raise(L, LASH_SB_ERROR, "loop", "'%s': too many levels of "
                       "symbolic links, or the path changed while it was "
                       "resolved", path);
    break;
  case LSB_E_EXISTS:
    lash_sandbox_raise(L, LASH_SB_ERROR, "not_dir", "'%s': a parent is not a "
                       "directory", path);
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
  meta m;
  const char *path = lua_tostring(L, 3);
  (void)status;
  lash_wait_check(L, &f->w);
  fop_teardown(f);
  lua_pushvalue(L, 2);
  meta_parse(L, 6, lua_tostring(L, -1), &m);
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
  meta m;
  lsb_view *v;
  lsb_fileop fo;
  fop_op *f;
  int pfd[2], rc;
  pid_t pid;
  luaL_checktype(L, 1, LUA_TTABLE);
  id = check_id(L, 2);
  p = luaL_checkstring(L, 3);
  lua_settop(L, 4);
  load(L, 1, id, root, sizeof root, &box, &m, 0);   /* 5 box, 6 meta */
  if (lash_sandbox_path_join(m.workdir, p, path, sizeof path) != 0)
    lash_sandbox_raise(L, LASH_SB_ERROR, "invalid", "'%s': not a usable path",
                       p);
  v = build_view(L, root, &m, 1);                     /* 7 */
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

static int local_stat(lua_State *L) { return fileop(L, LSB_OP_STAT); }
static int local_read_file(lua_State *L) { return fileop(L, LSB_OP_READ); }
static int local_write_file(lua_State *L) { return fileop(L, LSB_OP_WRITE); }
static int local_list_dir(lua_State *L) { return fileop(L, LSB_OP_LIST); }

/* ---- tags, poll ------------------------------------------------------------------ */

static int local_read_tags(lua_State *L) {
  char root[LSB_PATH_MAX];
  lsb_box *box;
  meta m;
  luaL_checktype(L, 1, LUA_TTABLE);
  load(L, 1, check_id(L, 2), root, sizeof root, &box, &m, 0);
  if (lua_getfield(L, -1, "tags") != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
  }
  return 1;
}

static void check_tag_map(lua_State *L, int idx) {
  luaL_checktype(L, idx, LUA_TTABLE);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
      luaL_error(L, "tags must map strings to strings");
    lua_pop(L, 1);
  }
}

static void save_or_raise(lua_State *L, lsb_box *box, int metat,
                          const char *id) {
  int rc = meta_save(L, box, metat);
  if (rc)
    lash_sandbox_raise(L, LASH_SB_ERROR, "io", "cannot write the metadata of "
                       "sandbox '%s': %s", id, strerror(-rc));
}

static int local_write_tags(lua_State *L) {
  char root[LSB_PATH_MAX];
  lsb_box *box;
  meta m;
  const char *id;
  luaL_checktype(L, 1, LUA_TTABLE);
  id = check_id(L, 2);
  check_tag_map(L, 3);
  lua_settop(L, 3);
  load(L, 1, id, root, sizeof root, &box, &m, 1);   /* 4 box, 5 meta */
  lua_pushvalue(L, 3);
  lua_setfield(L, 5, "tags");
  save_or_raise(L, box, 5, id);
  return 0;
}

/* Under the exclusive lock: compare the expected keys, then replace. */
static int local_cas_tags(lua_State *L) {
  char root[LSB_PATH_MAX];
  lsb_box *box;
  meta m;
  const char *id;
  int cur, match = 1;
  luaL_checktype(L, 1, LUA_TTABLE);
  id = check_id(L, 2);
  luaL_checktype(L, 3, LUA_TTABLE);
  check_tag_map(L, 4);
  lua_settop(L, 4);
  load(L, 1, id, root, sizeof root, &box, &m, 1);   /* 5 box, 6 meta */
  if (lua_getfield(L, 6, "tags") != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
  }
  cur = lua_gettop(L);                               /* 7 */
  lua_pushnil(L);
  while (match && lua_next(L, 3)) {
    int t = lua_getfield(L, cur, lua_tostring(L, -2));
    if (lua_isboolean(L, -2) && !lua_toboolean(L, -2))
      match = t == LUA_TNIL;
    else
      match = t == LUA_TSTRING && lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
  }
  if (!match) {
    lua_pop(L, 1);   /* the key lua_next left */
    lua_pushboolean(L, 0);
    lua_pushvalue(L, cur);
    return 2;
  }
  lua_pushvalue(L, 4);
  lua_setfield(L, 6, "tags");
  save_or_raise(L, box, 6, id);
  lua_pushboolean(L, 1);
  lua_pushvalue(L, 4);
  return 2;
}

static int local_poll(lua_State *L) {
  char root[LSB_PATH_MAX];
  const char *id;
  lsb_box *box;
  meta m;
  int rc;
  luaL_checktype(L, 1, LUA_TTABLE);
  id = check_id(L, 2);
  state_root(L, 1, root, sizeof root);
  box = push_box(L);
  rc = lsb_box_open(root, id, 0, box);
  lua_createtable(L, 0, 3);
  if (rc == -ENOENT) {
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "running");
    lua_pushliteral(L, "gone");
    lua_setfield(L, -2, "status");
    return 1;
  }
  if (rc)
    lash_sandbox_raise(L, LASH_SB_ERROR, "io", "cannot open sandbox '%s': %s",
                       id, strerror(-rc));
  meta_load(L, box, id);
  meta_parse(L, -1, id, &m);
  lua_pop(L, 1);
  lua_pushboolean(L, wall_now() < m.expires_at);
  lua_setfield(L, -2, "running");
  lua_pushstring(L, wall_now() < m.expires_at ? "running" : "expired");
  lua_setfield(L, -2, "status");
  lua_pushinteger(L, (lua_Integer)m.expires_at);
  lua_setfield(L, -2, "expires_at");
  return 1;
}

/* ---- destroy, list, gc --------------------------------------------------------- */

/* Release the host uid recorded in a box (file "uid") that lived at path. */
static void release_uid(int dirfd, const char *path) {
  char *data = NULL;
  size_t len;
  if (lsb_read_all(dirfd, "uid", 32, &data, &len) == 0) {
    unsigned long u = strtoul(data, NULL, 10);
    if (u >= LSB_UID_BASE && u < (unsigned long)LSB_UID_BASE + LSB_UID_RANGE)
      lsb_uid_release(LSB_UID_DIR, (uid_t)u, path);
  }
  free(data);
}

/* Destroy id under root: kill its running commands, move it out of the
** way atomically (so it is gone for everyone at once), remove the files.
** Returns 1 when it existed, 0 when it was already gone. */
#define TRASH_MAX (LSB_PATH_MAX + 64)

/* Under box's exclusive lock: kill the commands of sandbox id, empty and
** remove its cgroup, give back its uid and disk, and rename it to a trash
** name, so it is gone for everyone at once. Returns 0 with the trash path
** in trash, or an errno; *cg_busy: its group would not go (gc retries). */
static int bury(const char *root, const char *id, lsb_box *box,
                char trash[TRASH_MAX], int *cg_busy) {
  char from[LSB_PATH_MAX];
  unsigned char r[4];
  lsb_jobs_kill(box->dirfd);
  snprintf(from, sizeof from, "%s/%s", root, id);
  /* whatever still runs in its cgroup (an escaped or orphaned process),
  ** then the group; the uid goes back with the sandbox */
  *cg_busy = lsb_cgroup_remove_at(box->dirfd, id) != 0;
  release_uid(box->dirfd, from);
  lsb_disk_release(from);
  if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) memset(r, 0, sizeof r);
  snprintf(trash, TRASH_MAX, "%s/.trash-%s-%02x%02x%02x%02x", root, id,
           r[0], r[1], r[2], r[3]);
  return rename(from, trash) != 0 ? errno : 0;
}

static int destroy_box(lua_State *L, const char *root, const char *id) {
  lsb_box *box = push_box(L);
  char trash[TRASH_MAX];
  int rc, i, cg_busy = 0;
  /* our own jail of it first (reaped here); other processes' through the
  ** job records below */
  stop_super(L, root, id);
  rc = lsb_box_open(root, id, LSB_LOCK_EX, box);
  if (rc == -ENOENT) {
    lua_pop(L, 1);
    return 0;
  }
  if (rc)
    lash_sandbox_raise(L, LASH_SB_ERROR, "io", "cannot open sandbox '%s': %s",
                       id, strerror(-rc));
  if ((rc = bury(root, id, box, trash, &cg_busy)) != 0) {
    lsb_box_close(box);
    lua_pop(L, 1);
    if (rc == ENOENT) return 0;
    lash_sandbox_raise(L, LASH_SB_ERROR, "io", "cannot remove sandbox '%s': %s",
                       id, strerror(rc));
  }
  lsb_box_close(box);
  lua_pop(L, 1);
  /* killed processes may still be writing for a moment: retry briefly, and
  ** leave what resists to gc (the sandbox is already gone by its id) */
  for (i = 0; i < 20 && !cg_busy; i++) {   /* a busy group: gc retries */
    if (lsb_rmtree_at(AT_FDCWD, trash) == 0) break;
    usleep(10000);
  }
  return 1;
}

static int local_destroy(lua_State *L) {
  char root[LSB_PATH_MAX];
  const char *id;
  luaL_checktype(L, 1, LUA_TTABLE);
  id = check_id(L, 2);
  state_root(L, 1, root, sizeof root);
  destroy_box(L, root, id);
  return 0;
}

/* Call fn(L, root, name) for every entry of the state root (fn may raise). */
static int local_list(lua_State *L) {
  char root[LSB_PATH_MAX];
  DIR *d;
  struct dirent *e;
  int n = 0, out;
  luaL_checktype(L, 1, LUA_TTABLE);
  state_root(L, 1, root, sizeof root);
  lua_newtable(L);
  out = lua_gettop(L);
  /* names first: no DIR* may be open while Lua could raise */
  lua_newtable(L);
  d = opendir(root);
  if (d) {
    int k = 0;
    while ((e = readdir(d)) != NULL)
      if (lsb_id_valid(e->d_name)) {
        lua_pushstring(L, e->d_name);
        lua_rawseti(L, -2, ++k);
      }
    closedir(d);
  }
  {
    lua_Integer i, k = (lua_Integer)lua_rawlen(L, -1);
    int names = lua_gettop(L);
    for (i = 1; i <= k; i++) {
      const char *id;
      lsb_box *box;
      meta m;
      int top = lua_gettop(L);
      lua_rawgeti(L, names, i);
      id = lua_tostring(L, -1);
      box = push_box(L);
      if (lsb_box_open(root, id, 0, box) != 0) {
        lua_settop(L, top);
        continue;
      }
      meta_load(L, box, id);
      meta_parse(L, -1, id, &m);
      lua_createtable(L, 0, 6);
      lua_pushstring(L, id);
      lua_setfield(L, -2, "id");
      lua_pushinteger(L, (lua_Integer)m.expires_at);
      lua_setfield(L, -2, "expires_at");
      lua_pushstring(L, wall_now() < m.expires_at ? "running" : "expired");
      lua_setfield(L, -2, "status");
      lua_pushstring(L, m.workdir);
      lua_setfield(L, -2, "workdir");
      lua_pushstring(L, m.isolation_none ? "none" : "bwrap");
      lua_setfield(L, -2, "isolation");
      lua_getfield(L, -2, "tags");
      lua_setfield(L, -2, "tags");
      lua_getfield(L, -2, "created_at");
      lua_setfield(L, -2, "created_at");
      lua_rawseti(L, out, ++n);
      lua_settop(L, top);
    }
  }
  lua_settop(L, out);
  return 1;
}

static int local_gc(lua_State *L) {
  char root[LSB_PATH_MAX], path[2 * LSB_PATH_MAX];
  DIR *d;
  struct dirent *e;
  int out, names, n = 0;
  lua_Integer i, k = 0;
  luaL_checktype(L, 1, LUA_TTABLE);
  find_root(L, 1, root, sizeof root);   /* gc does all that reclaim would */
  lua_newtable(L);
  out = lua_gettop(L);
  lua_newtable(L);
  names = lua_gettop(L);
  d = opendir(root);
  if (d) {
    while ((e = readdir(d)) != NULL) {
      if (strncmp(e->d_name, ".trash-", 7) == 0 || lsb_id_valid(e->d_name)) {
        lua_pushstring(L, e->d_name);
        lua_rawseti(L, names, (int)++k);
      }
    }
    closedir(d);
  }
  for (i = 1; i <= k; i++) {
    const char *name;
    int top = lua_gettop(L), rc;
    lsb_box *box;
    lua_rawgeti(L, names, i);
    name = lua_tostring(L, -1);
    snprintf(path, sizeof path, "%s/%s", root, name);
    if (name[0] == '.') {          /* a destroy that left files behind */
      int tfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (tfd >= 0) {
        char tid[LSB_ID_LEN + 1];
        snprintf(tid, sizeof tid, "%s", name + 7);
        if (lsb_id_valid(tid) && lsb_cgroup_remove_at(tfd, tid) != 0) {
          close(tfd);          /* still busy: keep the record for next time */
          lua_settop(L, top);
          continue;
        }
        close(tfd);
      }
      lsb_disk_release(path);
      lsb_rmtree_at(AT_FDCWD, path);
      lua_settop(L, top);
      continue;
    }
    box = push_box(L);
    rc = lsb_box_open(root, name, 0, box);
    if (rc == -ENOENT) {
      /* no metadata: a create that crashed half way; give it an hour */
      struct stat st;
      lsb_box_close(box);
      if (stat(path, &st) == 0 && S_ISDIR(st.st_mode) &&
          wall_now() - (double)st.st_mtime > 3600) {
        char mp[2 * LSB_PATH_MAX + 16];
        snprintf(mp, sizeof mp, "%s/meta.json", path);
        if (access(mp, F_OK) != 0 && lsb_rmtree_at(AT_FDCWD, path) == 0) {
          lua_pushstring(L, name);
          lua_rawseti(L, out, ++n);
        }
      }
      lua_settop(L, top);
      continue;
    }
    if (rc == 0) {
      meta m;
      meta_load(L, box, name);
      meta_parse(L, -1, name, &m);
      lsb_box_close(box);
      if (wall_now() >= m.expires_at && destroy_box(L, root, name)) {
        lua_pushstring(L, name);
        lua_rawseti(L, out, ++n);
      }
    }
    lua_settop(L, top);
  }
  lua_settop(L, out);
  return 1;
}

/* ---- reclaiming on open ------------------------------------------------ */

/* When a process first opens a state root (and again every RECLAIM_EVERY
** seconds in one that lives long), it removes sandboxes that expired more
** than RECLAIM_GRACE seconds ago, so nobody has to run `lash sandbox gc`.
** The work is bounded, so opening never stalls: at most RECLAIM_MAX
** sandboxes and RECLAIM_BUDGET of time per open, starting at a random
** place in the directory so that over many opens every entry is seen;
** the rest waits for the next open or for gc. It is safe with other lash
** processes: a sandbox is taken with a non-blocking exclusive lock (one
** in use by another process is skipped, never waited for), checked again
** under that lock, and renamed away atomically as destroy does. It never
** touches a sandbox that is live, within the grace (its owner may still be
** tearing it down), held (a holder mark), or running a command; gc, asked
** for by a person, removes every expired one. */
#define RECLAIM_GRACE 60.0                /* seconds past its expiry */
#define RECLAIM_MAX 8                     /* sandboxes per open */
#define RECLAIM_BUDGET 100000000ull       /* ns per open */
#define RECLAIM_EVERY 600.0               /* seconds, in a long-lived process */
#define RECLAIM_KEY "lash.sandbox.local.reclaimed"

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* reclaim_one(root, id, deadline) -> true when sandbox id was reclaimed.
** Raises on damaged metadata (the caller's pcall skips it). */
static int reclaim_one(lua_State *L) {
  const char *root = lua_tostring(L, 1), *id = lua_tostring(L, 2);
  uint64_t deadline = (uint64_t)lua_tointeger(L, 3);
  char trash[TRASH_MAX];
  lsb_box *box = push_box(L);
  meta m;
  int held, cg_busy = 0;
  if (lsb_box_open(root, id, LSB_LOCK_EX | LSB_LOCK_TRY, box) != 0)
    return 0;   /* in use (-EWOULDBLOCK), being created or destroyed: skip */
  meta_load(L, box, id);
  meta_parse(L, -1, id, &m);
  lua_getfield(L, -1, "tags");
  held = lua_istable(L, -1) &&
         lua_getfield(L, -1, LASH_SB_TAG_HOLDER) == LUA_TSTRING &&
         lua_rawlen(L, -1) > 0;
  if (held || wall_now() < m.expires_at + RECLAIM_GRACE ||
      lsb_jobs_alive(box->dirfd) > 0 || bury(root, id, box, trash, &cg_busy) != 0)
    return 0;
  lsb_box_close(box);
  if (!cg_busy) lsb_rmtree_until(AT_FDCWD, trash, deadline);   /* the rest: next time */
  lua_pushboolean(L, 1);
  return 1;
}

/* reclaim_sweep(root): the bounded sweep; returns how many it reclaimed. */
static int reclaim_sweep(lua_State *L) {
  const char *root = lua_tostring(L, 1);
  uint64_t deadline = mono_ns() + RECLAIM_BUDGET;
  lua_Integer i, k = 0, start;
  int names, done = 0;
  uint32_t r = 0;
  DIR *d;
  struct dirent *e;
  lua_newtable(L);
  names = lua_gettop(L);
  /* names first: no DIR* may be open while Lua could raise */
  if ((d = opendir(root)) == NULL) return 0;
  while ((e = readdir(d)) != NULL && k < 100000)
    if (strncmp(e->d_name, ".trash-", 7) == 0 || lsb_id_valid(e->d_name)) {
      lua_pushstring(L, e->d_name);
      lua_rawseti(L, names, ++k);
    }
  closedir(d);
  if (k == 0) return 0;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
    r = (uint32_t)mono_ns();
  start = (lua_Integer)(r % (uint32_t)k);
  for (i = 0; i < k && done < RECLAIM_MAX && mono_ns() < deadline; i++) {
    const char *name;
    lua_rawgeti(L, names, 1 + (start + i) % k);
    name = lua_tostring(L, -1);
    if (name[0] == '.') {   /* a destroy that left files behind */
      char path[2 * LSB_PATH_MAX];
      snprintf(path, sizeof path, "%s/%s", root, name);
      lsb_rmtree_until(AT_FDCWD, path, deadline);
    } else {
      lua_pushcfunction(L, reclaim_one);
      lua_pushstring(L, root);
      lua_pushvalue(L, -3);
      lua_pushinteger(L, (lua_Integer)deadline);
      if (lua_pcall(L, 3, 1, 0) == LUA_OK && lua_toboolean(L, -1)) done++;
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  lua_pushinteger(L, done);
  return 1;
}

static void reclaim(lua_State *L, const char *root) {
  int top = lua_gettop(L);
  double now = (double)mono_ns() / 1e9;
  const char *env = getenv("LASH_SANDBOX_RECLAIM");
  if (env && strcmp(env, "off") == 0) return;
  if (lua_getfield(L, LUA_REGISTRYINDEX, RECLAIM_KEY) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, RECLAIM_KEY);
  }
  if (lua_getfield(L, -1, root) == LUA_TNUMBER &&
      now - lua_tonumber(L, -1) < RECLAIM_EVERY) {
    lua_settop(L, top);
    return;
  }
  lua_pop(L, 1);
  lua_pushnumber(L, now);
  lua_setfield(L, -2, root);
  lua_pushcfunction(L, reclaim_sweep);
  lua_pushstring(L, root);
  lua_pcall(L, 1, 1, 0);   /* best effort: a failure leaves it to gc */
  lua_settop(L, top);
}

const lash_sandbox_backend lash_sandbox_backend_local = {
  "local",
  create_options,
  config_options,
  "/workspace",
  local_create,
  local_exec,
  local_stat,
  local_read_file,
  local_write_file,
  local_list_dir,
  local_read_tags,
  local_write_tags,
  local_poll,
  local_destroy,
  local_cas_tags,
  local_list,
  local_gc,
  local_probe,
  local_snapshot,
  local_spawn,
};
