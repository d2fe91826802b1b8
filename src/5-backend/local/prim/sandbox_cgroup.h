/*
** sandbox_cgroup.h: the control group of each local sandbox (pids,
** memory), no Lua (sandbox_cgroup.c).
*/
#ifndef lash_sandbox_cgroup_h
#define lash_sandbox_cgroup_h

#include <stdint.h>

#include "sandbox_state.h"

/* ---- the control group (sandbox_cgroup.c) --------------------------- */

/* One group per sandbox: v2 <base>/<id> (base: $LASH_CGROUP_ROOT, or
** "lash" beside lash's own group), or v1 <pids>/lash/<id> and
** <memory>/lash/<id> under lash's own groups. version 0: none. */
typedef struct lsb_cgroup {
  int version;
  char dir[2][LSB_PATH_MAX];   /* v2: dir[0]; v1: dir[0] pids, dir[1] memory */
} lsb_cgroup;

/* Find a writable hierarchy and make the group of sandbox id with
** pids.max = pids and memory.max = memory (0: "max"; swap counted in it).
** Returns 0, or -errno with *why saying what is missing and how to get it
** (LASH_CGROUP_ROOT=none switches cgroups off). */
int  lsb_cgroup_setup(const char *id, uint64_t pids, uint64_t memory,
                      lsb_cgroup *cg, char *why, size_t whysz);
/* Record it in the box (file "cgroup") / read it back, checked to be a
** group named id in a cgroup file system. load: -ENOENT when the sandbox
** has none. */
int  lsb_cgroup_save(int boxfd, const lsb_cgroup *cg, uint64_t pids,
                     uint64_t memory);
int  lsb_cgroup_load(int boxfd, const char *id, lsb_cgroup *cg,
                     uint64_t *pids, uint64_t *memory);
/* Open cgroup.procs of the group (made again with its limits when it is
** gone, e.g. after a reboot), for lsb_spawn_opts.cgroup_fds. */
int  lsb_cgroup_open(const lsb_cgroup *cg, uint64_t pids, uint64_t memory,
                     int fds[2]);
void lsb_cgroup_close(int fds[2]);
/* In a forked child before exec: join the group. 0 or -1 (errno set). */
int  lsb_cgroup_enter(const int fds[2]);
/* v1: the sandbox's group in the freezer hierarchy (made only when a
** snapshot freezes it; thawed by kill, removed with the group). 0, or
** -ENOENT on v2, without a group or without a v1 freezer. */
int  lsb_cgroup_freezer_dir(const lsb_cgroup *cg, char *out, size_t outsz);
/* SIGKILL everything in the group (pids.max set to 0 first so nothing new
** starts). Returns the number of signals sent. */
int  lsb_cgroup_kill(const lsb_cgroup *cg);
/* Kill, then remove the group. 0, or -EBUSY when it would not go. */
int  lsb_cgroup_remove(const lsb_cgroup *cg);
/* Remove the group recorded in a box, if any (and unregister it). */
int  lsb_cgroup_remove_at(int boxfd, const char *id);
/* As root, the groups lash made, each a file <id> naming its sandbox's
** directory: register at create, unregister at removal. sweep: remove the
** groups beside cg's whose listed sandbox directory is gone (a state root
** deleted without a destroy); unlisted ones are left alone. Returns how
** many went. */
#define LSB_CGROUP_DIR "/var/lib/lash/cgroups"
void lsb_cgroup_register(const char *id, const char *box);
void lsb_cgroup_unregister(const char *id);
int  lsb_cgroup_sweep(const lsb_cgroup *cg);

#endif
