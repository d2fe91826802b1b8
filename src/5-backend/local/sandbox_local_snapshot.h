/*
** sandbox_local_snapshot.h: snapshots of local sandboxes (internal; see
** sandbox_local_snapshot.c).
*/
#ifndef lash_sandbox_local_snapshot_h
#define lash_sandbox_local_snapshot_h

#include "sandbox_local_int.h"

#include <sys/types.h>

#include "lua.h"

/* "ls-" + the random part of a sandbox id. */
int lsb_snapshot_id_valid(const char *s);
/* <root>/snapshots/<snap>; -EINVAL for a malformed id. */
int lsb_snapshot_path(const char *root, const char *snap, char *out, size_t outsz);
/* Copy snapshot snap into workspace (an empty directory) and, as root, give
** every file to uid:gid. 0, or -errno with err set. */
int lsb_snapshot_restore(const char *root, const char *snap, const char *workspace,
                         uid_t uid, gid_t gid, char *err, size_t errsz);
/* The backend slot snapshot(cfg, id) for the sandbox under root: pushes the
** new snapshot's id (or raises a sandbox error). */
int lsb_snapshot_slot(lua_State *L, const char *root);

#endif
