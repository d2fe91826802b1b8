/*
** sandbox_snapshot.h: snapshots of local sandboxes (internal; see
** sandbox_snapshot.c).
*/
#ifndef lash_sandbox_snapshot_h
#define lash_sandbox_snapshot_h

#include "sandbox_state.h"

#include <sys/types.h>

/* "ls-" + the random part of a sandbox id. */
int lsb_snapshot_id_valid(const char *s);
/* <root>/snapshots/<snap>; -EINVAL for a malformed id. */
int lsb_snapshot_path(const char *root, const char *snap, char *out, size_t outsz);
/* Copy snapshot snap into workspace (an empty directory) and, as root, give
** every file to uid:gid. 0, or -errno with err set. */
int lsb_snapshot_restore(const char *root, const char *snap, const char *workspace,
                         uid_t uid, gid_t gid, char *err, size_t errsz);
/* Copy the workspace of sandbox id under root into a new snapshot (under
** the sandbox's shared lock, so destroy and gc wait for the copy; its
** commands frozen meanwhile, else *warn says why not) and give its id. 0;
** -ENOENT when the sandbox is gone; another -errno with err. */
int lsb_snapshot_take(const char *root, const char *id, char snap[LSB_ID_LEN + 1],
                      char *err, size_t errsz, char *warn, size_t warnsz);

/* Remove snapshot snap: renamed aside first (so its id never names a
** half-removed copy), then deleted. 0, also when there is no such
** snapshot; -EINVAL for a malformed id; another -errno with err. */
int lsb_snapshot_drop(const char *root, const char *snap, char *err, size_t errsz);

#endif
