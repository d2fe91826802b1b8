/*
** sandbox_copy.h: copying a tree a sandbox controls, on the host, without
** ever following a link the sandbox wrote (internal; see sandbox_copy.c).
*/
#ifndef lash_sandbox_copy_h
#define lash_sandbox_copy_h

#include <stddef.h>
#include <sys/types.h>

/* What a copy did. */
typedef struct lsb_copy_stats {
  unsigned long files, dirs, links, specials;
  unsigned long skipped;   /* entries that vanished or changed kind mid-copy,
                           ** and devices (a jail cannot make one) */
} lsb_copy_stats;

#define LSB_COPY_KEEP_OWNER ((uid_t)-1)

/* Copy everything beneath the directory `from` (an open fd) into the
** directory `to` (an open fd, empty), and from's mode and times onto to.
** Every entry is reached from its parent's descriptor with no symlink
** followed, so a directory swapped for a link mid-copy is skipped, never
** entered; links are copied as links. Files, directories, links, FIFOs and
** sockets are copied with their mode (no set-id bits) and times; each
** copy gets uid:gid, or keeps the source's with LSB_COPY_KEEP_OWNER (as
** root; an unprivileged caller's copies are its own). stats may be NULL.
** Returns 0 or -errno, with why (a path relative to from) set. */
int lsb_copy_tree(int from, int to, uid_t uid, gid_t gid, lsb_copy_stats *stats,
                  char *why, size_t whysz);

/* Open name beneath dirfd (a relative path; no component may be a symlink,
** "..", or an absolute path): openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS,
** per-component O_NOFOLLOW where openat2 is missing. -1 with errno. */
int lsb_open_beneath(int dirfd, const char *rel, int flags, mode_t mode);

#endif
