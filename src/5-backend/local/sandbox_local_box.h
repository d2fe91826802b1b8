/*
** sandbox_local_box.h: the Lua side of the local backend, shared by its
** files (prefix lsbl_; not a public API):
**   sandbox_local_box.c     a sandbox's directory: state root, lock,
**                           metadata, view, burying
**   sandbox_local_exec.c    the command engine: exec, supervisors, spawn
**   sandbox_local_fileop.c  the file operations
**   sandbox_local.c         the backend slots of sandbox.h, on top of them
** The C primitives below them (no Lua) are in sandbox_local_int.h.
*/
#ifndef lash_sandbox_local_box_h
#define lash_sandbox_local_box_h

#include "lua.h"
#include "sandbox_local_int.h"

/* A sandbox's metadata, parsed (meta.json). */
typedef struct lsbl_meta {
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
} lsbl_meta;

/* Holders the stack closes on return or error: a box lock, a view. A
** box's user value keeps alive whoever lends it fds (lsb_box.holds). */
lsb_box  *lsbl_push_box(lua_State *L);
lsb_view *lsbl_push_view(lua_State *L);

/* The state root of cfg (the sandbox's state_root, the host's, or
** lsb_state_root's defaults); state_root also reclaims there what expired
** a while ago (bounded), for an operation. */
void lsbl_find_root(lua_State *L, int cfg, char *out, size_t sz);
void lsbl_state_root(lua_State *L, int cfg, char *out, size_t sz);
/* The sandbox id at idx, checked to be one of ours. */
const char *lsbl_check_id(lua_State *L, int idx);

/* Push the decoded meta.json of the open box (raises when damaged); write
** the table at idx as meta.json (0 or -errno); parse the table at t. */
void   lsbl_meta_load(lua_State *L, lsb_box *b, const char *id);
void   lsbl_meta_load_fd(lua_State *L, int fd, const char *id);
int    lsbl_meta_save(lua_State *L, lsb_box *b, int idx);
void   lsbl_meta_parse(lua_State *L, int t, const char *id, lsbl_meta *m);
double lsbl_mnum(lua_State *L, int t, const char *k, double dflt);

/* 1 the first time key is asked for in this state (a warning said once
** per process), 0 after. */
int lsbl_first_time(lua_State *L, const char *key);

/* Open and lock id under root (shared, or LSB_LOCK_EX), pushing the box
** (to-be-closed); a sandbox that does not exist raises "gone". */
lsb_box *lsbl_open_box(lua_State *L, const char *root, const char *id,
                       int exclusive);
/* The same into the closed holder b already pushed. */
lsb_box *lsbl_open_box_in(lua_State *L, lsb_box *b, const char *root,
                          const char *id, int exclusive);
/* Raise "expired" for a sandbox past its end. */
void lsbl_check_expiry(lua_State *L, const lsbl_meta *m);
/* Its disk quota made or mounted again when needed (raises; warns once
** when it goes on without). 1 when that stays so until the mount table
** changes. */
int  lsbl_disk_check(lua_State *L, const char *root, lsb_box *box,
                     const lsbl_meta *m);
/* Open id (shared lock, or exclusive), load and parse its metadata, refuse
** it expired, check its disk. Pushes box (to-be-closed) and the meta
** table. */
void lsbl_load(lua_State *L, int cfg, const char *id, char *root,
               size_t rootsz, lsb_box **box, lsbl_meta *m, int exclusive);

/* The same for a command or a file operation (sandbox_local_cache.c):
** what it reads is kept per lua_State and sandbox and checked again
** cheaply under the lock. The meta table pushed is shared: read it, never
** change it. With cg, also the sandbox's cgroup record (version 0: none;
** raises when damaged). */
void lsbl_load_kept(lua_State *L, int cfg, const char *id, char *root,
                    size_t rootsz, lsb_box **box, lsbl_meta *m,
                    lsb_cgroup *cg, uint64_t *pids, uint64_t *memory);
/* cgroup.procs of the sandbox's group cg for a command (lsb_cgroup_open's
** fds[2]): kept open with the box's entry when box was lent by one
** (*borrowed 1: not the caller's to close), opened anew with `again` (a
** child could not join through them). 0 or -errno. */
int  lsbl_kept_cgroup(lsb_box *box, const lsb_cgroup *cg, uint64_t pids,
                      uint64_t memory, int again, int fds[2], int *borrowed);
/* Forget what is kept of id under root (destroyed by this process). */
void lsbl_forget_kept(lua_State *L, const char *root, const char *id);
/* The view of sandbox m (in root) in a to-be-closed userdata. */
lsb_view *lsbl_build_view(lua_State *L, const char *root, const lsbl_meta *m,
                          int open_fds);

/* Under box's exclusive lock: kill its commands, give back its cgroup, uid
** and disk, rename it to a trash name (in trash). 0 or an errno. */
#define LSBL_TRASH_MAX (LSB_PATH_MAX + 64)
int lsbl_bury(const char *root, const char *id, lsb_box *box,
              char trash[LSBL_TRASH_MAX], int *cg_busy);

void lsbl_close_fd(int *fd);   /* close when open; -1 after */

/* The slots the engine files give sandbox_local.c (see sandbox.h). */
int  lsbl_exec(lua_State *L);
int  lsbl_spawn(lua_State *L);
void lsbl_stop_super(lua_State *L, const char *root, const char *id);
int  lsbl_stat(lua_State *L);
int  lsbl_read_file(lua_State *L);
int  lsbl_write_file(lua_State *L);
int  lsbl_list_dir(lua_State *L);

#endif
