/*
** sandbox_local.c: the "local" sandbox backend, its slots of sandbox.h.
** A sandbox is a directory under the state root (sandbox_state.c,
** opened through sandbox_local_box.c); its commands run in one bubblewrap
** jail over its workspace (sandbox_jail.c), built at its first command
** and run by a supervisor inside it (the command engine,
** sandbox_local_exec.c), and every file operation in a helper child that
** sees the same view with the jail's credentials (sandbox_local_fileop.c).
** This file holds what is left: probing bubblewrap, create (limits,
** cgroup, uid, disk quota, metadata), snapshot, tags, poll, destroy, list
** and gc, and the vtable tying the slots together.
*/
#include "sandbox.h"
#include "sandbox_local_box.h"
#include "sandbox_port.h"
#include "sandbox_snapshot.h"
#include "sandbox_seccomp.h"
#include "jaild/sandbox_jaild.h"
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

#define PROBE_KEY "lash.sandbox.local.probe"

#define JAIL_UID 65534            /* nobody: the jail's host uid under root */
#define JAIL_GID 65534

static const char *const create_options[] = {"rootfs", "limits", "isolation",
                                             NULL};
static const char *const config_options[] = {"state_root", "bwrap", NULL};


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
  /* every jail runs under the seccomp filter: a kernel or bwrap that
  ** cannot install it has no jail */
  lsb_argv_add(&a, "--seccomp");
  lsb_argv_add(&a, "4");
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
  o.fresh_keyring = 1;
  if (a.oom) {
    lsb_argv_free(&a);
    snprintf(msg, msgsz, "out of memory");
    return 0;
  }
  if ((o.pass_fd = lsb_seccomp_memfd()) < 0) {
    lsb_argv_free(&a);
    snprintf(msg, msgsz, "cannot build the jail's seccomp filter: %s", strerror(-o.pass_fd));
    return 0;
  }
  rc = lsb_spawn_child(&o, &sp, &stage);
  close(o.pass_fd);
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

/* ---- the probe, remembered across processes ------------------------------
** A probe is a jail of its own, run and waited for (5-10 ms, tens under
** load) by every process that makes a jailed sandbox. A successful one is
** kept in a file on a tmpfs a reboot clears ($XDG_RUNTIME_DIR/lash, else
** /run/lash for root; nowhere else), keyed by what could change its answer:
** bwrap's identity (path, inode, size, mtime), the euid and the kernel's
** user-namespace switches. A failure is never kept, so a fix is seen at
** once; a file or directory not ours alone (another owner, group- or
** world-writable) is ignored: what it says decides the jail's flags. */
#define PROBE_FILE "bwrap-probe"

static int probe_key(const char *bwrap, char *key, size_t sz) {
  static const char *const knobs[] = {
    "/proc/sys/user/max_user_namespaces",
    "/proc/sys/kernel/unprivileged_userns_clone",
    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns", NULL};
  struct stat st;
  size_t n;
  int i;
  if (stat(bwrap, &st) != 0) return -1;
  n = (size_t)snprintf(key, sz, "v2 %s ino=%llu size=%lld mtime=%lld.%09ld euid=%u",
                       bwrap, (unsigned long long)st.st_ino, (long long)st.st_size,
                       (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec,
                       (unsigned)geteuid());
  for (i = 0; knobs[i] && n < sz; i++) {
    char v[32];
    int fd = open(knobs[i], O_RDONLY | O_CLOEXEC);
    ssize_t r = fd >= 0 ? read(fd, v, sizeof v - 1) : -1;
    if (fd >= 0) close(fd);
    if (r < 0) r = 0;
    v[r] = '\0';
    v[strcspn(v, "\n")] = '\0';
    n += (size_t)snprintf(key + n, sz - n, " %s=%s", strrchr(knobs[i], '/') + 1, r ? v : "-");
  }
  if (n >= sz - 1) return -1;
  key[n++] = '\n';
  key[n] = '\0';
  return 0;
}

/* The directory of the remembered probe, opened (-1: none here); made
** when make is set. */
static int probe_dir(int make) {
  char dir[LSB_PATH_MAX];
  const char *rt = getenv("XDG_RUNTIME_DIR");
  struct stat st;
  int fd;
  if (rt && rt[0] == '/') {
    if ((size_t)snprintf(dir, sizeof dir, "%s/lash", rt) >= sizeof dir) return -1;
  } else if (geteuid() == 0) {
    snprintf(dir, sizeof dir, "/run/lash");
  } else {
    return -1;
  }
  if (make) mkdir(dir, 0700);
  fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -1;
  if (fstat(fd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 022)) {
    close(fd);
    return -1;
  }
  return fd;
}

/* 1 and *du when a probe with this key succeeded before, else 0. */
static int probe_recalled(const char *key, int *du) {
  char *data = NULL;
  size_t len = 0, kl = strlen(key);
  struct stat st;
  int dfd = probe_dir(0), fd, ok = 0;
  if (dfd < 0) return 0;
  fd = openat(dfd, PROBE_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  close(dfd);
  if (fd < 0) return 0;
  if (fstat(fd, &st) == 0 && st.st_uid == geteuid() && !(st.st_mode & 022) &&
      lsb_read_fd(fd, 4096, &data, &len) == 0 && len > kl && memcmp(data, key, kl) == 0 &&
      (strcmp(data + kl, "disable_userns=1\n") == 0 || strcmp(data + kl, "disable_userns=0\n") == 0)) {
    *du = data[kl + strlen("disable_userns=")] == '1';
    ok = 1;
  }
  free(data);
  close(fd);
  return ok;
}

static void probe_remember(const char *key, int du) {
  char body[LSB_PATH_MAX + 512];
  int dfd = probe_dir(1), n;
  if (dfd < 0) return;
  n = snprintf(body, sizeof body, "%sdisable_userns=%d\n", key, du);
  if (n > 0 && (size_t)n < sizeof body) lsb_write_unsynced(dfd, PROBE_FILE, body, (size_t)n, 0600);
  close(dfd);
}

/* Push the probe result for this state: {ok =, reason =, bwrap =,
** disable_userns =}, computed once per bwrap path (and recalled across
** processes, above). */
static void probe(lua_State *L, int cfg) {
  char path[LSB_PATH_MAX], msg[1024], key[LSB_PATH_MAX + 256];
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
    int du = 1, keyed = probe_key(path, key, sizeof key) == 0;
    if (keyed && probe_recalled(key, &du)) {
      ok = 1;
    } else {
      du = 1;
      ok = try_bwrap(path, 1, msg, sizeof msg);
      if (!ok && strstr(msg, "disable-userns")) {   /* an older bwrap */
        du = 0;
        ok = try_bwrap(path, 0, msg, sizeof msg);
      }
      if (ok && keyed) probe_remember(key, du);
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
  pids = (uint64_t)local_mnum(L, -1, "pids", 0);
  memory = (uint64_t)local_mnum(L, -1, "memory", 0);
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
  if (local_first_time(L, "lash.sandbox.local.cgroup_warned"))
    lash_runtime_log(lash_runtime_get(L), LASH_LOG_WARN,
                     "local sandboxes get no cgroup of their own (%s): their "
                     "memory is bounded only per process (limits.address_space)"
                     " and their processes by the per-uid count "
                     "(limits.processes)", reason);
  return 0;
}

/* limits.disk = false (`--limit disk=off`): no quota, not even the default */
static int disk_opted_out(lua_State *L, int spec) {
  int off = 0;
  if (lua_getfield(L, spec, "limits") == LUA_TTABLE) {
    lua_getfield(L, -1, "disk");
    off = lua_isboolean(L, -1) && !lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return off;
}

/* The default disk quota (stored in the limits table at t), or 0 with one
** warning per process where none can be made here. */
/* 1 unless the state root already holds marker with this text: a warning
** about the machine is said once per state root and reason, not by every
** process (a CI job's every run), and again when the reason changes. */
static int first_in_root(const char *root, const char *marker,
                         const char *text) {
  char *old = NULL;
  size_t len = 0, n = strlen(text);
  int dfd, seen;
  if (lash_mkdirs(root, 0711) != 0) return 1;
  dfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return 1;
  seen = lsb_read_all(dfd, marker, 4096, &old, &len) == 0 && len == n &&
         memcmp(old, text, n) == 0;
  free(old);
  if (!seen) lsb_write_unsynced(dfd, marker, text, n, 0644);
  close(dfd);
  return !seen;
}

static uint64_t default_disk(lua_State *L, const char *root, int t) {
  char why[512];
  uint64_t bytes;
  t = lua_absindex(L, t);
  if (!lsb_disk_usable(why, sizeof why)) {
    if (local_first_time(L, "lash.sandbox.local.no_disk_warned") &&
        first_in_root(root, ".no-disk-quota", why))
      lash_runtime_log(lash_runtime_get(L), LASH_LOG_WARN,
                       "local sandboxes get no disk quota here: %s. Their "
                       "workspace and /tmp share the filesystem of %s, each "
                       "file under limits.file_size, so one sandbox can fill "
                       "it; run lash as root with loop devices and "
                       "mkfs.ext4 for a quota per sandbox (--limit disk=off "
                       "silences this)", why, root);
    return 0;
  }
  bytes = lsb_disk_default(root);
  lua_pushinteger(L, (lua_Integer)bytes);
  lua_setfield(L, t, "disk");
  return bytes;
}

static int local_create(lua_State *L) {
  char root[LSB_PATH_MAX], id[LSB_ID_LEN + 1], where[2 * LSB_PATH_MAX];
  char rootfs[LSB_PATH_MAX], ws_host[2 * LSB_PATH_MAX];
  const char *workdir, *iso = "bwrap", *bwrap_path = NULL, *netmode = "off", *from = NULL;
  int none, rc, tries, du = 1, meta_idx, spec = 2, own_uid = 0, durable;
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
  local_state_root(L, 1, root, sizeof root);
  /* an ephemeral sandbox's records skip the fsyncs (four to ten per
  ** create, each milliseconds): it ends with this process, and what a power
  ** cut leaves of it is gc's; detach persists them (local_persist) */
  lua_getfield(L, spec, "ephemeral");
  durable = !lua_toboolean(L, -1);
  lua_pop(L, 1);
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
  lua_pushnumber(L, floor(lash_wall_now()));
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
  if (!durable) {
    /* later rewrites of meta.json stay unsynced too, until persist */
    lua_pushboolean(L, 1);
    lua_setfield(L, meta_idx, "ephemeral");
  }
  lua_pushinteger(L, (lua_Integer)uid);
  lua_setfield(L, meta_idx, "uid");
  lua_pushinteger(L, (lua_Integer)gid);
  lua_setfield(L, meta_idx, "gid");
  check_limits(L, spec, explicit);
  lua_getfield(L, -1, "disk");
  disk = (uint64_t)lua_tointeger(L, -1);
  lua_pop(L, 1);
  if (!explicit[LIMIT_DISK] && !disk_opted_out(L, spec))
    disk = default_disk(L, root, -1);
  lua_setfield(L, meta_idx, "limits");
  if (disk && explicit[LIMIT_DISK] && !lsb_disk_usable(where, sizeof where))
    lash_sandbox_raise(L, LASH_SB_ERROR, "unsupported", "limits.disk needs a "
                       "filesystem of the sandbox's own, and lash cannot make "
                       "one here: %s. Run lash as root on a machine with loop "
                       "devices, or leave --limit disk out (the workspace and "
                       "/tmp then share the state root's filesystem; each file "
                       "stays under limits.file_size)", where);
  lua_getfield(L, spec, "tags");
  lua_setfield(L, meta_idx, "tags");
  /* quota mounts of sandboxes deleted by hand hold loop devices: free them
  ** before taking one more (as the cgroups of such sandboxes are swept) */
  if (disk) lsb_disk_sweep();
  /* create the state root; the jail's uid must be able to reach it */
  if ((rc = lash_mkdirs(root, 0711)) != 0)
    lash_sandbox_raise(L, LASH_SB_ERROR, "io", "cannot create the state root "
                       "%s: %s", root, strerror(-rc));
  if (!none && uid != geteuid() && !lsb_traversable(root, uid, gid, where,
                                                     sizeof where))
    lash_sandbox_raise(L, LASH_SB_ERROR, "io",
                       "the jail runs as uid %d (lash runs as root) and cannot "
                       "reach the state root %s (%s is not searchable by "
                       "it); make it searchable (chmod o+x %s) or use a state "
                       "root under searchable directories (state_root, "
                       "LASH_SANDBOX_ROOT)%s", (int)uid, root, where, where,
                       strncmp(root, "/var/lib/lash/", 14) == 0 ? ""
                       : ", e.g. /var/lib/lash/sandboxes");
  /* the box: workspace and tmp owned by the jail's uid */
  b = local_push_box(L);
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
      if (durable) lsb_write_atomic(b->dirfd, "uid", u, (size_t)n, 0600);
      else lsb_write_unsynced(b->dirfd, "uid", u, (size_t)n, 0600);
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
  if (!rc && disk && (explicit[LIMIT_DISK] || from)) {
    /* the disk quota: workspace and tmp in a filesystem of that size; the
    ** default one waits for the first use (lsb_disk_ensure), unless a
    ** snapshot is about to fill the workspace */
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
  if (!rc) rc = durable ? lsb_write_atomic(b->dirfd, "meta.json", json, json_len, 0600)
                       : lsb_write_unsynced(b->dirfd, "meta.json", json, json_len, 0600);
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
  local_meta m;
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 2);
  /* gone and expired sandboxes are refused as by every operation */
  const char *id = local_check_id(L, 2);
  char snap[LSB_ID_LEN + 1], err[4 * LSB_PATH_MAX], warn[LSB_PATH_MAX + 256];
  int rc;
  local_load(L, 1, id, root, sizeof root, &box, &m, 0);
  (void)box;   /* its shared lock is held meanwhile */
  rc = lsb_snapshot_take(root, id, snap, err, sizeof err, warn, sizeof warn);
  if (warn[0])
    lash_runtime_log(lash_runtime_get(L), LASH_LOG_WARN, "sandbox %s: %s", id, warn);
  if (rc == -ENOENT)
    return lash_sandbox_raise(L, LASH_SB_UNAVAILABLE, "not_found",
                              "local sandbox %s is gone (destroyed, collected or never "
                              "existed)", id);
  if (rc)
    return lash_sandbox_raise(L, LASH_SB_ERROR, "io", "cannot snapshot sandbox %s: %s",
                              id, err);
  lua_pushstring(L, snap);
  return 1;
}

/* drop_snapshot(cfg, snap): remove a snapshot of this state root; one
** already gone is success. */
static int local_drop_snapshot(lua_State *L) {
  char root[LSB_PATH_MAX], err[2 * LSB_PATH_MAX];
  const char *snap;
  int rc;
  luaL_checktype(L, 1, LUA_TTABLE);
  snap = luaL_checkstring(L, 2);
  local_state_root(L, 1, root, sizeof root);
  rc = lsb_snapshot_drop(root, snap, err, sizeof err);
  if (rc == -EINVAL)
    return lash_sandbox_raise(L, LASH_SB_ERROR, "invalid", "'%s' is not a local snapshot id "
                              "(`lash sandbox snapshot ID` prints one)", snap);
  if (rc)
    return lash_sandbox_raise(L, LASH_SB_ERROR, "io", "cannot remove snapshot %s: %s", snap, err);
  return 0;
}

/* ---- tags, poll ------------------------------------------------------------------ */

static int local_read_tags(lua_State *L) {
  char root[LSB_PATH_MAX];
  lsb_box *box;
  local_meta m;
  luaL_checktype(L, 1, LUA_TTABLE);
  local_load(L, 1, local_check_id(L, 2), root, sizeof root, &box, &m, 0);
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
  int rc = local_meta_save(L, box, metat);
  if (rc)
    lash_sandbox_raise(L, LASH_SB_ERROR, "io", "cannot write the metadata of "
                       "sandbox '%s': %s", id, strerror(-rc));
}

static int local_write_tags(lua_State *L) {
  char root[LSB_PATH_MAX];
  lsb_box *box;
  local_meta m;
  const char *id;
  luaL_checktype(L, 1, LUA_TTABLE);
  id = local_check_id(L, 2);
  check_tag_map(L, 3);
  lua_settop(L, 3);
  local_load(L, 1, id, root, sizeof root, &box, &m, 1);   /* 4 box, 5 meta */
  lua_pushvalue(L, 3);
  lua_setfield(L, 5, "tags");
  save_or_raise(L, box, 5, id);
  return 0;
}

/* Under the exclusive lock: compare the expected keys, then replace. */
static int local_cas_tags(lua_State *L) {
  char root[LSB_PATH_MAX];
  lsb_box *box;
  local_meta m;
  const char *id;
  int cur, match = 1;
  luaL_checktype(L, 1, LUA_TTABLE);
  id = local_check_id(L, 2);
  luaL_checktype(L, 3, LUA_TTABLE);
  check_tag_map(L, 4);
  lua_settop(L, 4);
  local_load(L, 1, id, root, sizeof root, &box, &m, 1);   /* 5 box, 6 meta */
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

/* connect(cfg, id, port) -> fd: a socket to the port inside whichever of
** the sandbox's running jails listens on it (prim/sandbox_port.c). */
static int local_connect(lua_State *L) {
  char root[LSB_PATH_MAX], msg[256];
  const char *id;
  lsb_box *box;
  lua_Integer port;
  int rc;
  luaL_checktype(L, 1, LUA_TTABLE);
  id = local_check_id(L, 2);
  port = luaL_checkinteger(L, 3);
  local_state_root(L, 1, root, sizeof root);
  box = local_push_box(L);
  rc = lsb_box_open(root, id, 0, box);
  if (rc == -ENOENT)
    lash_sandbox_raise(L, LASH_SB_UNAVAILABLE, "gone", "sandbox '%s' is gone", id);
  if (rc)
    lash_sandbox_raise(L, LASH_SB_ERROR, "io", "cannot open sandbox '%s': %s", id, strerror(-rc));
  msg[0] = 0;
  rc = lsb_port_connect(box->dirfd, (int)port, msg, sizeof msg);
  if (rc < 0)
    lash_sandbox_raise(L, LASH_SB_ERROR, rc == -ECONNREFUSED || rc == -ESRCH ? "refused" : "io",
                       "%s", msg[0] ? msg : strerror(-rc));
  lua_pushinteger(L, rc);
  return 1;
}

static int local_poll(lua_State *L) {
  char root[LSB_PATH_MAX];
  const char *id;
  lsb_box *box;
  local_meta m;
  int rc;
  luaL_checktype(L, 1, LUA_TTABLE);
  id = local_check_id(L, 2);
  local_state_root(L, 1, root, sizeof root);
  box = local_push_box(L);
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
  local_meta_load(L, box, id);
  local_meta_parse(L, -1, id, &m);
  lua_pop(L, 1);
  lua_pushboolean(L, lash_wall_now() < m.expires_at);
  lua_setfield(L, -2, "running");
  lua_pushstring(L, lash_wall_now() < m.expires_at ? "running" : "expired");
  lua_setfield(L, -2, "status");
  lua_pushinteger(L, (lua_Integer)m.expires_at);
  lua_setfield(L, -2, "expires_at");
  return 1;
}

/* ---- destroy, list, gc --------------------------------------------------------- */

/* Destroy id under root: kill its running commands, move it out of the
** way atomically (so it is gone for everyone at once), remove the files.
** Returns 1 when it existed, 0 when it was already gone. */

static int destroy_box(lua_State *L, const char *root, const char *id) {
  lsb_box *box = local_push_box(L);
  char trash[LOCAL_TRASH_MAX];
  int rc, i, cg_busy = 0;
  /* our own jail of it first (reaped here); other processes' through the
  ** job records below */
  local_stop_super(L, root, id);
  local_forget_kept(L, root, id);
  rc = lsb_box_open(root, id, LSB_LOCK_EX, box);
  if (rc == -ENOENT) {
    lua_pop(L, 1);
    return 0;
  }
  if (rc)
    lash_sandbox_raise(L, LASH_SB_ERROR, "io", "cannot open sandbox '%s': %s",
                       id, strerror(-rc));
  if ((rc = local_bury(root, id, box, trash, &cg_busy)) != 0) {
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
  id = local_check_id(L, 2);
  local_state_root(L, 1, root, sizeof root);
  destroy_box(L, root, id);
  return 0;
}

/* persist(cfg, id): detach made an ephemeral sandbox one that outlives
** this process; sync what create left unsynced (meta.json, the uid and
** cgroup records, the box's entry in the state root). */
static int local_persist(lua_State *L) {
  char root[LSB_PATH_MAX];
  const char *id;
  lsb_box *box;
  int rc, meta, rfd;
  luaL_checktype(L, 1, LUA_TTABLE);
  id = local_check_id(L, 2);
  local_state_root(L, 1, root, sizeof root);
  box = local_push_box(L);
  rc = lsb_box_open(root, id, LSB_LOCK_EX, box);
  if (rc)
    lash_sandbox_raise(L, LASH_SB_UNAVAILABLE, "gone", "cannot keep sandbox "
                       "'%s' past this process: %s", id, strerror(-rc));
  local_meta_load(L, box, id);
  meta = lua_gettop(L);
  lua_pushnil(L);
  lua_setfield(L, meta, "ephemeral");
  rc = local_meta_save(L, box, meta);
  if (!rc) rc = lsb_sync_at(box->dirfd, "uid");
  if (!rc) rc = lsb_sync_at(box->dirfd, "cgroup");
  if (!rc) {
    rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rfd < 0 || fsync(rfd) != 0) rc = -errno;
    if (rfd >= 0) close(rfd);
  }
  lsb_box_close(box);
  if (rc)
    lash_sandbox_raise(L, LASH_SB_ERROR, "io", "cannot keep sandbox '%s' past "
                       "this process: writing its records under %s failed: %s",
                       id, root, strerror(-rc));
  return 0;
}

/* Call fn(L, root, name) for every entry of the state root (fn may raise). */
static int local_list(lua_State *L) {
  char root[LSB_PATH_MAX];
  DIR *d;
  struct dirent *e;
  int n = 0, out;
  luaL_checktype(L, 1, LUA_TTABLE);
  local_state_root(L, 1, root, sizeof root);
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
      local_meta m;
      int top = lua_gettop(L);
      lua_rawgeti(L, names, i);
      id = lua_tostring(L, -1);
      box = local_push_box(L);
      if (lsb_box_open(root, id, 0, box) != 0) {
        lua_settop(L, top);
        continue;
      }
      local_meta_load(L, box, id);
      local_meta_parse(L, -1, id, &m);
      lua_createtable(L, 0, 6);
      lua_pushstring(L, id);
      lua_setfield(L, -2, "id");
      lua_pushinteger(L, (lua_Integer)m.expires_at);
      lua_setfield(L, -2, "expires_at");
      lua_pushstring(L, lash_wall_now() < m.expires_at ? "running" : "expired");
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

/* 1 when the open box's meta.json is there but not a JSON object (empty or
** cut short: written unsynced before a power cut). */
static int meta_damaged(lua_State *L, lsb_box *box) {
  char *data;
  size_t len;
  int ok;
  if (lsb_read_all(box->dirfd, "meta.json", 1 << 20, &data, &len) != 0) return 0;
  ok = lash_sandbox_json_decode(L, data, len) && lua_istable(L, -1);
  lua_pop(L, 1);
  free(data);
  return !ok;
}

static int local_gc(lua_State *L) {
  char root[LSB_PATH_MAX], path[2 * LSB_PATH_MAX];
  DIR *d;
  struct dirent *e;
  int out, names, n = 0, damaged;
  lua_Integer i, k = 0;
  luaL_checktype(L, 1, LUA_TTABLE);
  local_find_root(L, 1, root, sizeof root);   /* gc does all that reclaim would */
  lsb_disk_sweep();                     /* and frees orphaned quota mounts */
  lsb_disk_templates_gc(root);          /* and disk templates out of use */
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
    box = local_push_box(L);
    rc = lsb_box_open(root, name, 0, box);
    damaged = rc == 0 && meta_damaged(L, box);
    if (damaged) {
      /* an ephemeral sandbox's unsynced metadata after a power cut */
      lsb_box_close(box);
      rc = -ENOENT;
    }
    if (rc == -ENOENT) {
      /* no metadata: a create that crashed half way; give it an hour */
      struct stat st;
      lsb_box_close(box);
      if (stat(path, &st) == 0 && S_ISDIR(st.st_mode) &&
          lash_wall_now() - (double)st.st_mtime > 3600) {
        char mp[2 * LSB_PATH_MAX + 16];
        snprintf(mp, sizeof mp, "%s/meta.json", path);
        /* its quota's mounts first: rmtree stays on one filesystem */
        if ((damaged || access(mp, F_OK) != 0) && (lsb_disk_release(path), 1) &&
            lsb_rmtree_at(AT_FDCWD, path) == 0) {
          lua_pushstring(L, name);
          lua_rawseti(L, out, ++n);
        }
      }
      lua_settop(L, top);
      continue;
    }
    if (rc == 0) {
      local_meta m;
      local_meta_load(L, box, name);
      local_meta_parse(L, -1, name, &m);
      lsb_box_close(box);
      if (lash_wall_now() >= m.expires_at && destroy_box(L, root, name)) {
        lua_pushstring(L, name);
        lua_rawseti(L, out, ++n);
      }
    }
    lua_settop(L, top);
  }
  lua_settop(L, out);
  return 1;
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
  local_persist,
  local_connect,
  local_drop_snapshot,
  NULL   /* tunnels: a local port is published on this host (sandbox:publish) */
};

