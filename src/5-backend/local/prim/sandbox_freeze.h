/*
** sandbox_freeze.h: holding a sandbox's processes still while the host
** reads its files (internal; see sandbox_freeze.c).
*/
#ifndef lash_sandbox_freeze_h
#define lash_sandbox_freeze_h

#include "sandbox_cgroup.h"

#include <sys/types.h>

typedef struct lsb_frozen {
  int version;                   /* 0: nothing frozen */
  char state[LSB_PATH_MAX + 32]; /* v2 <group>/cgroup.freeze, v1 freezer.state */
  pid_t guard;                   /* thaws the group if this process dies */
  int guard_fd;                  /* its pipe: closing it lets the guard go */
} lsb_frozen;

#define LSB_FROZEN_INIT {0, {0}, -1, -1}

/* Freeze every process of the sandbox's group cg: cgroup v2 cgroup.freeze,
** v1 the freezer hierarchy (a group of the same name, the pids group's
** processes moved into it until none is left outside). A guard process
** thaws the group should this one die before lsb_thaw. Returns 1 frozen, 0
** when there is nothing to freeze with (no group, no v1 freezer), or
** -errno with why (then nothing is left frozen). */
int  lsb_freeze(const lsb_cgroup *cg, lsb_frozen *fz, char *why, size_t whysz);
/* Thaw what lsb_freeze froze and reap its guard; idempotent. */
void lsb_thaw(lsb_frozen *fz);
#endif
