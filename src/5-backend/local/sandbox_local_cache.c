/*
** sandbox_local_cache.c: what a command (or a file operation) reads of its
** sandbox, kept per lua_State and sandbox and checked again cheaply at
** each use (prefix local_; local_load_kept in sandbox_local_box.h). A
** sandbox may be changed or destroyed by another process at any time, so
** every use still takes the sandbox's lock (on the kept lock file) and,
** under it, checks what the fresh open would have:
**   - <root>/<id> is still the kept directory (destroy, gc and reclaim
**     rename it away under the exclusive lock): one stat;
**   - meta.json is still the file that was read: one fstatat, compared by
**     device, inode, size, mtime and ctime. lash replaces meta.json
**     atomically (a new inode), and the kept open file stops the old
**     inode number from being handed to a newer meta.json;
**   - the disk quota's mounts and the cgroup record's file system, which
**     only a change of the mount table can undo: a poll of
**     /proc/self/mountinfo, kept open once per lua_State, says whether it
**     changed since (then both are checked again).
** Anything that does not match is forgotten and read afresh by the same
** code as local_load, so a sandbox that is gone, expired or damaged raises
** exactly the same errors. What is kept: the directory, its lock file and
** meta.json open, the parsed metadata and its decoded table (shared with
** the callers, who only read it), the cgroup record and its cgroup.procs
** (local_kept_cgroup: opened again when a child cannot join through them,
** a group removed meanwhile). It goes when this
** process destroys the sandbox, when a check finds it stale, or with the
** lua_State, as the sandbox's supervisor does.
*/
#include "sandbox.h"
#include "sandbox_local_box.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define KEPT_KEY   "lash.sandbox.local.kept"
#define KEPT_MT    "lash.sandbox.local.kept_box"
#define MOUNTS_KEY "lash.sandbox.local.mounts"

/* What identifies one version of meta.json. */
typedef struct file_key {
  dev_t dev;
  ino_t ino;
  off_t size;
  long long mtime_s, mtime_ns, ctime_s, ctime_ns;
} file_key;

static void key_of(const struct stat *st, file_key *k) {
  memset(k, 0, sizeof *k);
  k->dev = st->st_dev;
  k->ino = st->st_ino;
  k->size = st->st_size;
  k->mtime_s = (long long)st->st_mtim.tv_sec;
  k->mtime_ns = (long long)st->st_mtim.tv_nsec;
  k->ctime_s = (long long)st->st_ctim.tv_sec;
  k->ctime_ns = (long long)st->st_ctim.tv_nsec;
}

typedef struct kept {
  int dirfd, lockfd, metafd;   /* owned; -1 once closed */
  int holds;                   /* boxes borrowing the lock (see lsb_box) */
  dev_t dir_dev;
  ino_t dir_ino;
  file_key meta;
  local_meta m;                 /* m.id is the caller's, set at each use */
  int cg_rc;                   /* lsb_cgroup_load's answer */
  lsb_cgroup cg;
  uint64_t cg_pids, cg_memory;
  int cg_fds[2];               /* its cgroup.procs, opened at first use */
  int settled;                 /* the disk and cgroup checked at gen */
  unsigned gen;
} kept;

/* Copies that skip the unused tails of the path buffers (they are most of
** both structs). */
static void meta_copy(local_meta *d, const local_meta *s) {
  d->id = s->id;
  strcpy(d->workdir, s->workdir);
  strcpy(d->rootfs, s->rootfs);
  strcpy(d->bwrap, s->bwrap);
  d->expires_at = s->expires_at;
  d->timeout = s->timeout;
  d->network = s->network;
  d->isolation_none = s->isolation_none;
  d->disable_userns = s->disable_userns;
  d->drop = s->drop;
  d->uid = s->uid;
  d->gid = s->gid;
  d->limits = s->limits;
}

static void cgroup_copy(lsb_cgroup *d, const lsb_cgroup *s) {
  d->version = s->version;
  strcpy(d->dir[0], s->dir[0]);
  strcpy(d->dir[1], s->dir[1]);
}

static void kept_close(kept *k) {
  lsb_cgroup_close(k->cg_fds);
  local_close_fd(&k->metafd);
  local_close_fd(&k->lockfd);
  local_close_fd(&k->dirfd);
}

static int kept_gc(lua_State *L) {
  kept_close(luaL_checkudata(L, 1, KEPT_MT));
  return 0;
}

/* ---- the mount table's generation ---------------------------------------- */

typedef struct mounts {
  int fd;          /* /proc/self/mountinfo, -1: could not be opened */
  unsigned gen;
} mounts;

static int mounts_gc(lua_State *L) {
  mounts *mt = luaL_checkudata(L, 1, MOUNTS_KEY);
  local_close_fd(&mt->fd);
  return 0;
}

/* A number that changes whenever the mount table of this process's mount
** namespace may have changed (the kernel flags an open mountinfo with
** POLLPRI after each change). Without one it changes at every call. */
static unsigned mount_gen(lua_State *L) {
  mounts *mt;
  struct pollfd p;
  if (lua_getfield(L, LUA_REGISTRYINDEX, MOUNTS_KEY) == LUA_TUSERDATA) {
    mt = lua_touserdata(L, -1);
    lua_pop(L, 1);   /* anchored in the registry */
  } else {
    lua_pop(L, 1);
    mt = lua_newuserdatauv(L, sizeof *mt, 0);
    mt->fd = -1;
    mt->gen = 1;
    if (luaL_newmetatable(L, MOUNTS_KEY)) {
      lua_pushcfunction(L, mounts_gc);
      lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
    lua_setfield(L, LUA_REGISTRYINDEX, MOUNTS_KEY);
    mt->fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
    return mt->gen;
  }
  if (mt->fd < 0) return ++mt->gen;
  p.fd = mt->fd;
  p.events = POLLPRI;
  p.revents = 0;
  if (poll(&p, 1, 0) != 0) mt->gen++;   /* changed (or cannot tell) */
  return mt->gen;
}

/* ---- the kept sandboxes ---------------------------------------------------- */

static void push_kept_table(lua_State *L) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, KEPT_KEY) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, KEPT_KEY);
  }
}

/* At most this many sandboxes are kept per lua_State (each holds up to 5
** fds): a long-lived process that attaches to many sandboxes, which other
** processes destroy, would otherwise keep every one it ever used. */
#define KEPT_MAX 32

/* The kept table at t holds KEPT_MAX entries: forget the ones no box
** borrows (the next use of each reads it afresh). */
static void prune(lua_State *L, int t) {
  int n = 0;
  t = lua_absindex(L, t);
  lua_pushnil(L);
  while (lua_next(L, t)) {
    n++;
    lua_pop(L, 1);
  }
  if (n < KEPT_MAX) return;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    kept *k = luaL_testudata(L, -1, KEPT_MT);
    lua_pop(L, 1);
    if (k && k->holds == 0) {
      kept_close(k);
      lua_pushvalue(L, -1);
      lua_pushnil(L);
      lua_rawset(L, t);   /* clearing a field while traversing is allowed */
    }
  }
}

/* Drop the entry of path; its fds close now unless a box still borrows
** them (then with the entry, once nothing refers to it). */
static void forget(lua_State *L, const char *path) {
  kept *k;
  push_kept_table(L);
  lua_getfield(L, -1, path);
  k = luaL_testudata(L, -1, KEPT_MT);
  if (k) {
    if (k->holds == 0) kept_close(k);
    lua_pushnil(L);
    lua_setfield(L, -3, path);
  }
  lua_pop(L, 2);
}

void local_forget_kept(lua_State *L, const char *root, const char *id) {
  char path[LSB_PATH_MAX + LSB_ID_LEN + 2];
  if ((size_t)snprintf(path, sizeof path, "%s/%s", root, id) < sizeof path)
    forget(L, path);
}

static void hold(kept *k) {
  k->holds++;
}

static void unhold(kept *k) {
  if (k->holds > 0 && --k->holds == 0 && k->lockfd >= 0)
    flock(k->lockfd, LOCK_UN);
}

/* Take the lock of k (shared) and check, under it, that path still names
** the kept directory and meta.json is still the file that was read.
** 1 with the lock held; 0 (nothing held) when it must be read afresh. */
static int revalidate(kept *k, const char *path) {
  struct stat st;
  file_key now;
  if (k->dirfd < 0 || k->lockfd < 0 || k->metafd < 0) return 0;
  if (k->holds == 0) {
    int rc;
    while ((rc = flock(k->lockfd, LOCK_SH)) != 0 && errno == EINTR) {}
    if (rc != 0) return 0;
  }
  hold(k);
  if (stat(path, &st) != 0 || st.st_dev != k->dir_dev ||
      st.st_ino != k->dir_ino ||
      fstatat(k->dirfd, "meta.json", &st, AT_SYMLINK_NOFOLLOW) != 0) {
    unhold(k);
    return 0;
  }
  key_of(&st, &now);
  if (memcmp(&now, &k->meta, sizeof now) != 0) {
    unhold(k);
    return 0;
  }
  return 1;
}

static void raise_cgroup(lua_State *L, const char *id, int rc) {
  lash_sandbox_raise(L, LASH_SB_UNAVAILABLE, "corrupt", "the cgroup record "
                     "of sandbox '%s' is damaged (%s); destroy it", id,
                     strerror(-rc));
}

/* The first use (or one after a change): as local_load, into the holder b
** (pushed, closed), then keep it. Pushes meta. */
static void load_fresh(lua_State *L, lsb_box *b, const char *root,
                       const char *id, const char *path, local_meta *m,
                       lsb_cgroup *cg, uint64_t *pids, uint64_t *memory) {
  unsigned gen = mount_gen(L);   /* before what it guards is looked at */
  int settled, cg_rc, metat, boxi = lua_gettop(L);
  lsb_cgroup cgr;
  uint64_t p = 0, mem = 0;
  struct stat dst, mst;
  kept *k;
  local_open_box_in(L, b, root, id, 0);
  local_meta_load(L, b, id);                             /* meta */
  metat = lua_gettop(L);
  local_meta_parse(L, metat, id, m);
  local_check_expiry(L, m);
  settled = local_disk_check(L, root, b, m);
  cg_rc = lsb_cgroup_load(b->dirfd, id, &cgr, &p, &mem);
  if (cg && cg_rc && cg_rc != -ENOENT) raise_cgroup(L, id, cg_rc);
  if (cg) {
    cgroup_copy(cg, &cgr);
    *pids = p;
    *memory = mem;
  }
  /* keep it: meta.json cannot be replaced while the shared lock is held
  ** (lash writes it under the exclusive one), so the file open now is the
  ** one just read */
  k = lua_newuserdatauv(L, sizeof *k, 1);
  memset(k, 0, sizeof *k);
  k->dirfd = k->lockfd = k->metafd = -1;
  k->cg_fds[0] = k->cg_fds[1] = -1;
  if (luaL_newmetatable(L, KEPT_MT)) {
    lua_pushcfunction(L, kept_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  push_kept_table(L);                    /* allocations before the fds */
  prune(L, -1);
  k->metafd = openat(b->dirfd, "meta.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (k->metafd < 0 || fstat(k->metafd, &mst) != 0 ||
      fstat(b->dirfd, &dst) != 0) {
    kept_close(k);
    lua_pop(L, 2);   /* not kept: this use goes on as local_load's */
    return;
  }
  key_of(&mst, &k->meta);
  k->dir_dev = dst.st_dev;
  k->dir_ino = dst.st_ino;
  meta_copy(&k->m, m);
  k->m.id = NULL;
  k->cg_rc = cg_rc;
  cgroup_copy(&k->cg, &cgr);
  k->cg_pids = p;
  k->cg_memory = mem;
  k->settled = settled;
  k->gen = gen;
  lua_pushvalue(L, metat);
  lua_setiuservalue(L, -3, 1);
  /* the box's fds now belong to the entry, the box holds its lock */
  k->dirfd = b->dirfd;
  k->lockfd = b->lockfd;
  k->holds = 1;
  b->holds = &k->holds;
  lua_pushvalue(L, -2);
  lua_setiuservalue(L, boxi, 1);        /* the box keeps the entry alive */
  lua_pushvalue(L, -2);
  lua_setfield(L, -2, path);   /* on an error here the box gives all back */
  lua_pop(L, 2);
}

/* The entry a borrowed box was lent by (only entries lend boxes). */
static kept *lender(lsb_box *box) {
  return box->holds ? (kept *)(void *)((char *)box->holds -
                                       offsetof(kept, holds)) : NULL;
}

int local_kept_cgroup(lsb_box *box, const lsb_cgroup *cg, uint64_t pids,
                     uint64_t memory, int again, int fds[2], int *borrowed) {
  kept *k = lender(box);
  int rc;
  *borrowed = 0;
  if (!k) return lsb_cgroup_open(cg, pids, memory, fds);
  /* an open cgroup.procs stays valid until its group is removed, and a
  ** removed group's only shows when a child cannot join: then `again` */
  if (again) lsb_cgroup_close(k->cg_fds);
  if (k->cg_fds[0] < 0 &&
      (rc = lsb_cgroup_open(cg, pids, memory, k->cg_fds)) != 0)
    return rc;
  fds[0] = k->cg_fds[0];
  fds[1] = k->cg_fds[1];
  *borrowed = 1;
  return 0;
}

void local_load_kept(lua_State *L, int cfg, const char *id, char *root,
                    size_t rootsz, lsb_box **box, local_meta *m,
                    lsb_cgroup *cg, uint64_t *pids, uint64_t *memory) {
  char path[LSB_PATH_MAX + LSB_ID_LEN + 2];
  kept *k;
  lsb_box *b;
  local_state_root(L, cfg, root, rootsz);
  if ((size_t)snprintf(path, sizeof path, "%s/%s", root, id) >= sizeof path)
    luaL_error(L, "state root path too long");
  /* the holder first: nothing may raise between taking the lock and the
  ** holder that gives it back */
  b = *box = local_push_box(L);                           /* box */
  push_kept_table(L);
  lua_getfield(L, -1, path);
  lua_remove(L, -2);
  k = luaL_testudata(L, -1, KEPT_MT);
  if (k) lua_setiuservalue(L, -2, 1);   /* the box keeps the entry alive */
  else lua_pop(L, 1);
  if (!k || !revalidate(k, path)) {
    if (k) forget(L, path);
    load_fresh(L, b, root, id, path, m, cg, pids, memory);   /* meta */
    return;
  }
  /* the lock is held: the box borrows the entry's fds */
  b->dirfd = k->dirfd;
  b->lockfd = k->lockfd;
  b->holds = &k->holds;
  lua_getiuservalue(L, -1, 1);
  lua_getiuservalue(L, -1, 1);                           /* meta */
  lua_remove(L, -2);
  meta_copy(m, &k->m);
  m->id = id;
  local_check_expiry(L, m);
  {
    unsigned gen = mount_gen(L);
    if (!k->settled || k->gen != gen) {
      k->settled = 0;
      lsb_cgroup_close(k->cg_fds);
      k->settled = local_disk_check(L, root, b, m);
      k->cg_rc = lsb_cgroup_load(k->dirfd, id, &k->cg, &k->cg_pids,
                                 &k->cg_memory);
      k->gen = gen;
    }
  }
  if (cg) {
    if (k->cg_rc && k->cg_rc != -ENOENT) raise_cgroup(L, id, k->cg_rc);
    cgroup_copy(cg, &k->cg);
    *pids = k->cg_pids;
    *memory = k->cg_memory;
  }
}
