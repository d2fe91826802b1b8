/*
** sandbox_local_box.c: a local sandbox's directory as the slots open it
** (prefix local_, shared with the other Lua-side files of the local
** backend through sandbox_local_box.h): the state root (opening one
** reclaims sandboxes that expired a while ago, bounded), the lock and the
** metadata (meta.json through lash's JSON codec), the expiry check, the
** view of the sandbox, and burying a sandbox (kill, give back its uid,
** cgroup and disk, rename it away). Resources held across Lua calls that
** may raise live in to-be-closed userdata, so an error never leaks them.
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

#define BOX_MT   "lash.sandbox.local.box"
#define VIEW_MT  "lash.sandbox.local.view"
#define META_MAX (16u << 20)


/* ---- to-be-closed holders --------------------------------------------- */

static int box_close_mm(lua_State *L) {
  lsb_box_close(luaL_checkudata(L, 1, BOX_MT));
  return 0;
}

/* A new userdata of `size` bytes with metatable `mt` (whose __close and
** __gc both run `close`), marked to-be-closed so the stack releases it on
** return or error. */
static void *push_holder(lua_State *L, size_t size, const char *mt,
                         lua_CFunction close, int nuv) {
  void *p = lua_newuserdatauv(L, size, nuv);
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
lsb_box *local_push_box(lua_State *L) {
  /* its user value: whoever lends it fds (local_push_box_ref) */
  lsb_box *b = push_holder(L, sizeof *b, BOX_MT, box_close_mm, 1);
  b->dirfd = b->lockfd = -1;
  b->holds = NULL;
  lua_toclose(L, -1);
  return b;
}

static int view_close_mm(lua_State *L) {
  lsb_view_close(luaL_checkudata(L, 1, VIEW_MT));
  return 0;
}

lsb_view *local_push_view(lua_State *L) {
  lsb_view *v = push_holder(L, sizeof *v, VIEW_MT, view_close_mm, 0);
  v->n = 0;
  lua_toclose(L, -1);
  return v;
}

/* ---- config, ids, metadata ----------------------------------------------- */

/* The state root: the sandbox's own state_root option, else the embedding
** host's (lash_Options.state_root, kept in the registry by state.c), else
** lsb_state_root's defaults ($LASH_SANDBOX_ROOT, ...). */
void local_find_root(lua_State *L, int cfg, char *out, size_t sz) {
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
void local_state_root(lua_State *L, int cfg, char *out, size_t sz) {
  local_find_root(L, cfg, out, sz);
  reclaim(L, out);
}

const char *local_check_id(lua_State *L, int idx) {
  const char *id = luaL_checkstring(L, idx);
  if (!lsb_id_valid(id))
    lash_sandbox_raise(L, LASH_SB_UNAVAILABLE, "bad_id",
                       "'%s' is not a local sandbox id (they look like "
                       "lb- and 20 letters and digits)", id);
  return id;
}

/* Open and lock sandbox id; a sandbox that does not exist is terminal. */
lsb_box *local_open_box(lua_State *L, const char *root, const char *id,
                         int exclusive) {
  return local_open_box_in(L, local_push_box(L), root, id, exclusive);
}

/* The same into the (closed) holder b already pushed. */
lsb_box *local_open_box_in(lua_State *L, lsb_box *b, const char *root,
                          const char *id, int exclusive) {
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

static void meta_decode(lua_State *L, int rc, char *data, size_t len,
                        const char *id) {
  if (rc)
    lash_sandbox_raise(L, LASH_SB_UNAVAILABLE, "gone", "cannot read the "
                       "metadata of sandbox '%s': %s", id, strerror(-rc));
  rc = lash_sandbox_json_decode(L, data, len);
  free(data);
  if (!rc || !lua_istable(L, -1))
    lash_sandbox_raise(L, LASH_SB_UNAVAILABLE, "corrupt", "the metadata of "
                       "sandbox '%s' is damaged; destroy it", id);
}

/* Push the decoded meta.json of the open box. */
void local_meta_load(lua_State *L, lsb_box *b, const char *id) {
  char *data = NULL;
  size_t len = 0;
  int rc = lsb_read_all(b->dirfd, "meta.json", META_MAX, &data, &len);
  meta_decode(L, rc, data, len, id);
}

/* The same from meta.json open at fd. */
void local_meta_load_fd(lua_State *L, int fd, const char *id) {
  char *data = NULL;
  size_t len = 0;
  int rc = lsb_read_fd(fd, META_MAX, &data, &len);
  meta_decode(L, rc, data, len, id);
}

/* Write the table at idx as meta.json of the open box. */
int local_meta_save(lua_State *L, lsb_box *b, int idx) {
  const char *s;
  size_t len;
  int ephemeral;
  idx = lua_absindex(L, idx);
  lua_getfield(L, idx, "ephemeral");
  ephemeral = lua_toboolean(L, -1);
  lua_pop(L, 1);
  lash_json_encode(L, idx, LASH_JSON_HASH_ORDER);
  s = lua_tolstring(L, -1, &len);
  {
    /* an ephemeral sandbox's records are synced only when it is persisted
    ** (sandbox_local.c, local_persist) */
    int rc = ephemeral ? lsb_write_unsynced(b->dirfd, "meta.json", s, len, 0600)
                       : lsb_write_atomic(b->dirfd, "meta.json", s, len, 0600);
    lua_pop(L, 1);
    return rc;
  }
}

static const char *mstr(lua_State *L, int t, const char *k, char *out,
                        size_t sz) {
  if (lua_getfield(L, t, k) == LUA_TSTRING)
    snprintf(out, sz, "%s", lua_tostring(L, -1));
  else
    out[0] = '\0';
  lua_pop(L, 1);
  return out;
}

double local_mnum(lua_State *L, int t, const char *k, double dflt) {
  double v = dflt;
  if (lua_getfield(L, t, k) == LUA_TNUMBER) v = lua_tonumber(L, -1);
  lua_pop(L, 1);
  return v;
}

void local_meta_parse(lua_State *L, int t, const char *id, local_meta *m) {
  char iso[16];
  t = lua_absindex(L, t);
  memset(m, 0, sizeof *m);
  m->id = id;
  mstr(L, t, "workdir", m->workdir, sizeof m->workdir);
  mstr(L, t, "rootfs", m->rootfs, sizeof m->rootfs);
  mstr(L, t, "bwrap", m->bwrap, sizeof m->bwrap);
  mstr(L, t, "isolation", iso, sizeof iso);
  m->isolation_none = strcmp(iso, "none") == 0;
  m->expires_at = local_mnum(L, t, "expires_at", 0);
  m->timeout = (lua_Integer)local_mnum(L, t, "timeout", 0);
  {
    char net[8];
    mstr(L, t, "network", net, sizeof net);
    m->network = strcmp(net, "on") == 0;
  }
  lua_getfield(L, t, "disable_userns");
  m->disable_userns = lua_toboolean(L, -1);
  lua_pop(L, 1);
  m->uid = (uid_t)local_mnum(L, t, "uid", (double)getuid());
  m->gid = (gid_t)local_mnum(L, t, "gid", (double)getgid());
  m->drop = geteuid() == 0 && m->uid != 0;
  if (lua_getfield(L, t, "limits") == LUA_TTABLE) {
    int l = lua_gettop(L);
    m->limits.address_space = (uint64_t)local_mnum(L, l, "address_space", 0);
    m->limits.cpu_seconds = (uint64_t)local_mnum(L, l, "cpu_seconds", 0);
    m->limits.open_files = (uint64_t)local_mnum(L, l, "open_files", 0);
    m->limits.processes = (uint64_t)local_mnum(L, l, "processes", 0);
    m->limits.file_size = (uint64_t)local_mnum(L, l, "file_size", 0);
    m->limits.memory = (uint64_t)local_mnum(L, l, "memory", 0);
    m->limits.pids = (uint64_t)local_mnum(L, l, "pids", 0);
    m->limits.disk = (uint64_t)local_mnum(L, l, "disk", 0);
  }
  lua_pop(L, 1);
  if (!m->workdir[0] || !m->rootfs[0])
    lash_sandbox_raise(L, LASH_SB_UNAVAILABLE, "corrupt", "the metadata of "
                       "sandbox '%s' is damaged (no workdir or rootfs); "
                       "destroy it", id);
}

static void raise_expired(lua_State *L, const local_meta *m) {
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

/* 1 the first time key is asked for in this state (a warning said once per
** process), 0 after. */
int local_first_time(lua_State *L, const char *key) {
  int seen = lua_getfield(L, LUA_REGISTRYINDEX, key) != LUA_TNIL;
  lua_pop(L, 1);
  if (seen) return 0;
  lua_pushboolean(L, 1);
  lua_setfield(L, LUA_REGISTRYINDEX, key);
  return 1;
}

/* A default disk quota that could not be made: say so once per sandbox
** and process. */
static void disk_fallback_warn(lua_State *L, const char *id, const char *box,
                               const char *why) {
  char key[64 + LSB_ID_LEN];
  snprintf(key, sizeof key, "lash.sandbox.local.disk_warned.%s", id);
  if (local_first_time(L, key))
    lash_runtime_log(lash_runtime_get(L), LASH_LOG_WARN, "sandbox %s has no "
                     "disk quota: %s; its workspace and /tmp share the "
                     "filesystem of %s (each file stays under "
                     "limits.file_size), so it can fill that filesystem",
                     id, why, box);
}

/* Refuse sandbox m when it has expired. */
void local_check_expiry(lua_State *L, const local_meta *m) {
  if (lash_wall_now() >= m->expires_at) raise_expired(L, m);
}

/* The disk quota of the open box (in root): made at its first use,
** mounted again after a reboot. Raises when it cannot be; warns once when
** the box goes on without one. Returns 1 when what it found stays so
** while the mount table does not change (0: ask again next time). */
int local_disk_check(lua_State *L, const char *root, lsb_box *box,
                    const local_meta *m) {
  char bp[LSB_PATH_MAX + LSB_ID_LEN + 2], why[1024];
  int rc;
  snprintf(bp, sizeof bp, "%s/%s", root, m->id);
  rc = lsb_disk_ensure(box->dirfd, bp, m->limits.disk, m->uid, m->gid, why,
                       sizeof why);
  if (rc < 0)
    lash_sandbox_raise(L, LASH_SB_UNAVAILABLE, "io", "sandbox '%s': %s", m->id,
                       why);
  if (rc > 0) disk_fallback_warn(L, m->id, bp, why);
  /* without root a quota not made yet is made by the first use as root
  ** (maybe in another mount namespace): that one is not settled */
  return rc == 0 || geteuid() == 0;
}

/* Open id (shared lock), load and parse its metadata, refuse it expired.
** Pushes box (to-be-closed) and the meta table. */
void local_load(lua_State *L, int cfg, const char *id, char *root,
                 size_t rootsz, lsb_box **box, local_meta *m, int exclusive) {
  local_state_root(L, cfg, root, rootsz);
  *box = local_open_box(L, root, id, exclusive);
  local_meta_load(L, *box, id);
  local_meta_parse(L, -1, id, m);
  local_check_expiry(L, m);
  local_disk_check(L, root, *box, m);
}

static void box_path(lua_State *L, const char *root, const char *id,
                     char *out, size_t sz) {
  if ((size_t)snprintf(out, sz, "%s/%s", root, id) >= sz)
    luaL_error(L, "state root path too long");
}

/* Build the view of sandbox m (in root) into a to-be-closed userdata. */
lsb_view *local_build_view(lua_State *L, const char *root, const local_meta *m,
                            int open_fds) {
  char box[LSB_PATH_MAX];
  lsb_layout lay;
  lsb_view *v = local_push_view(L);
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

/* Under box's exclusive lock: kill the commands of sandbox id, empty and
** remove its cgroup, give back its uid and disk, and rename it to a trash
** name, so it is gone for everyone at once. Returns 0 with the trash path
** in trash, or an errno; *cg_busy: its group would not go (gc retries). */
int local_bury(const char *root, const char *id, lsb_box *box,
                char trash[LOCAL_TRASH_MAX], int *cg_busy) {
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
  snprintf(trash, LOCAL_TRASH_MAX, "%s/.trash-%s-%02x%02x%02x%02x", root, id,
           r[0], r[1], r[2], r[3]);
  return rename(from, trash) != 0 ? errno : 0;
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
  char trash[LOCAL_TRASH_MAX];
  lsb_box *box = local_push_box(L);
  local_meta m;
  int held, cg_busy = 0;
  if (lsb_box_open(root, id, LSB_LOCK_EX | LSB_LOCK_TRY, box) != 0)
    return 0;   /* in use (-EWOULDBLOCK), being created or destroyed: skip */
  local_meta_load(L, box, id);
  local_meta_parse(L, -1, id, &m);
  lua_getfield(L, -1, "tags");
  held = lua_istable(L, -1) &&
         lua_getfield(L, -1, LASH_SB_TAG_HOLDER) == LUA_TSTRING &&
         lua_rawlen(L, -1) > 0;
  if (held || lash_wall_now() < m.expires_at + RECLAIM_GRACE ||
      lsb_jobs_alive(box->dirfd) > 0 || local_bury(root, id, box, trash, &cg_busy) != 0)
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

void local_close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}
