/*
** sandbox_local_box.h: the Lua side of the local backend, shared by its
** files (prefix local_; not a public API):
**   sandbox_local_box.c     a sandbox's directory: state root, lock,
**                           metadata, view, burying
**   sandbox_local_exec.c    the command engine: exec, supervisors, spawn
**   sandbox_local_fileop.c  the file operations
**   sandbox_local.c         the backend slots of sandbox.h, on top of them
** The C primitives below them (no Lua) are in prim/, a header each.
*/
#ifndef lash_sandbox_local_box_h
#define lash_sandbox_local_box_h

#include "lua.h"
#include "sandbox_jail.h"
#include "sandbox_cgroup.h"
#include "sandbox_disk.h"

/* A sandbox's metadata, parsed (meta.json). */
typedef struct local_meta {
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
} local_meta;

/* Holders the stack closes on return or error: a box lock, a view. A
** box's user value keeps alive whoever lends it fds (lsb_box.holds). */
lsb_box  *local_push_box(lua_State *L);
lsb_view *local_push_view(lua_State *L);

/* The state root of cfg (the sandbox's state_root, the host's, or
** lsb_state_root's defaults); state_root also reclaims there what expired
** a while ago (bounded), for an operation. */
void local_find_root(lua_State *L, int cfg, char *out, size_t sz);
void local_state_root(lua_State *L, int cfg, char *out, size_t sz);
/* The sandbox id at idx, checked to be one of ours. */
const char *local_check_id(lua_State *L, int idx);

/* Push the decoded meta.json of the open box (raises when damaged); write
** the table at idx as meta.json (0 or -errno); parse the table at t. */
void   local_meta_load(lua_State *L, lsb_box *b, const char *id);
void   local_meta_load_fd(lua_State *L, int fd, const char *id);
int    local_meta_save(lua_State *L, lsb_box *b, int idx);
void   local_meta_parse(lua_State *L, int t, const char *id, local_meta *m);
double local_mnum(lua_State *L, int t, const char *k, double dflt);

/* 1 the first time key is asked for in this state (a warning said once
** per process), 0 after. */
int local_first_time(lua_State *L, const char *key);

/* Open and lock id under root (shared, or LSB_LOCK_EX), pushing the box
** (to-be-closed); a sandbox that does not exist raises "gone". */
lsb_box *local_open_box(lua_State *L, const char *root, const char *id,
                       int exclusive);
/* The same into the closed holder b already pushed. */
lsb_box *local_open_box_in(lua_State *L, lsb_box *b, const char *root,
                          const char *id, int exclusive);
/* Raise "expired" for a sandbox past its end. */
void local_check_expiry(lua_State *L, const local_meta *m);
/* Its disk quota made or mounted again when needed (raises; warns once
** when it goes on without). 1 when that stays so until the mount table
** changes. */
int  local_disk_check(lua_State *L, const char *root, lsb_box *box,
                     const local_meta *m);
/* Open id (shared lock, or exclusive), load and parse its metadata, refuse
** it expired, check its disk. Pushes box (to-be-closed) and the meta
** table. */
void local_load(lua_State *L, int cfg, const char *id, char *root,
               size_t rootsz, lsb_box **box, local_meta *m, int exclusive);

/* The same for a command or a file operation (sandbox_local_cache.c):
** what it reads is kept per lua_State and sandbox and checked again
** cheaply under the lock. The meta table pushed is shared: read it, never
** change it. With cg, also the sandbox's cgroup record (version 0: none;
** raises when damaged). */
void local_load_kept(lua_State *L, int cfg, const char *id, char *root,
                    size_t rootsz, lsb_box **box, local_meta *m,
                    lsb_cgroup *cg, uint64_t *pids, uint64_t *memory);
/* cgroup.procs of the sandbox's group cg for a command (lsb_cgroup_open's
** fds[2]): kept open with the box's entry when box was lent by one
** (*borrowed 1: not the caller's to close), opened anew with `again` (a
** child could not join through them). 0 or -errno. */
int  local_kept_cgroup(lsb_box *box, const lsb_cgroup *cg, uint64_t pids,
                      uint64_t memory, int again, int fds[2], int *borrowed);
/* Forget what is kept of id under root (destroyed by this process). */
void local_forget_kept(lua_State *L, const char *root, const char *id);
/* The view of sandbox m (in root) in a to-be-closed userdata. */
lsb_view *local_build_view(lua_State *L, const char *root, const local_meta *m,
                          int open_fds);

/* Under box's exclusive lock: kill its commands, give back its cgroup, uid
** and disk, rename it to a trash name (in trash). 0 or an errno. */
#define LOCAL_TRASH_MAX (LSB_PATH_MAX + 64)
int local_bury(const char *root, const char *id, lsb_box *box,
              char trash[LOCAL_TRASH_MAX], int *cg_busy);

void local_close_fd(int *fd);   /* close when open; -1 after */

/* The slots the engine files give sandbox_local.c (see sandbox.h). */
int  local_exec(lua_State *L);
int  local_spawn(lua_State *L);
void local_stop_super(lua_State *L, const char *root, const char *id);
int  local_stat(lua_State *L);
int  local_read_file(lua_State *L);
int  local_write_file(lua_State *L);
int  local_list_dir(lua_State *L);

#endif
