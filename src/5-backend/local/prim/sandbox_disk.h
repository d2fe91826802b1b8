/*
** sandbox_disk.h: the disk quota of a local sandbox, a filesystem of its
** own, and the template images it is copied from, no Lua
** (sandbox_disk.c, sandbox_disk_template.c).
*/
#ifndef lash_sandbox_disk_h
#define lash_sandbox_disk_h

#include <stdint.h>
#include <sys/types.h>

#include "sandbox_state.h"

/* ---- the disk quota (sandbox_disk.c) -------------------------------- */

/* 1 when a quota can be made here (root, loop devices, mkfs.ext4); else 0
** and *why says what is missing. */
int  lsb_disk_usable(char *why, size_t whysz);
/* Give the box at path box (its empty workspace/ and tmp/ made) a
** filesystem of bytes: <box>/disk.img, mounted at <box>/disk, its
** workspace/ and tmp/ (owned uid/gid) bound onto the box's. 0 or -errno
** with *why. */
int  lsb_disk_create(const char *box, uint64_t bytes, uid_t uid, gid_t gid,
                     char *why, size_t whysz);
/* The default quota of a sandbox under the state root root: 8 GiB, at most
** a quarter of what is free there rounded down to a power of two. */
uint64_t lsb_disk_default(const char *root);
/* Before a use of the box: a quota whose mounts are gone (a reboot) is
** mounted again; a default quota of bytes not made yet is made now (owned
** uid/gid). 0 (also for a box without a quota), 1 when the default quota
** could not be made and the box goes on without one (*why: warn), or
** -errno with *why. */
int  lsb_disk_ensure(int boxfd, const char *box, uint64_t bytes, uid_t uid,
                     gid_t gid, char *why, size_t whysz);
/* As root: unmount the quota filesystems of boxes removed without a
** destroy (a state root deleted by hand: no meta.json, no image left), so
** their loop devices go back. Returns how many mounts it undid. */
int  lsb_disk_sweep(void);
/* Unmount (lazily) the box's quota filesystem and its binds. */
void lsb_disk_release(const char *box);
/* sandbox_disk_template.c: make dst (absent or replaced) an empty ext4
** image of bytes, a sparse copy of the state root's template of that size
** (made by mkfs.ext4 when missing or damaged). 0, or -errno with *why and
** dst removed. */
int  lsb_disk_image(const char *root, const char *dst, uint64_t bytes, char *why,
                    size_t whysz);
/* gc: remove the templates unused for a day and any left half-made.
** Returns how many went. */
int  lsb_disk_templates_gc(const char *root);

#endif
