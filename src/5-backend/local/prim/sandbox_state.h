/*
** sandbox_state.h: the local backend's state on disk, no Lua (prefix lsb_,
** like every file of prim/): sandbox ids, the state root, per-sandbox
** directories and their locks, atomic metadata files, job records, tree
** removal, and the reservations of host uids (sandbox_state.c).
** Path normalization is the sandbox core's (sandbox_path.h).
*/
#ifndef lash_sandbox_state_h
#define lash_sandbox_state_h

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox_path.h"
#include "userdir.h"   /* lash_mkdirs */

#define LSB_PATH_MAX LASH_SB_PATH_MAX

/* ---- ids ------------------------------------------------------------ */

#define LSB_ID_PREFIX "lb-"
#define LSB_ID_RANDOM 20                 /* base32 characters */
#define LSB_ID_LEN (3 + LSB_ID_RANDOM)   /* without the NUL */

/* A fresh id: "lb-" + 20 characters of RFC 4648 base32 (lowercase
** a-z2-7), 100 bits from getrandom. Returns 0 or -errno. */
int lsb_id_new(char out[LSB_ID_LEN + 1]);
/* 1 when s has exactly that shape (so it is safe as a path component). */
int lsb_id_valid(const char *s);

/* ---- paths ---------------------------------------------------------- */

/* Normalizing and joining are the core's (sandbox_path.h). */
/* 1 if the normalized path equals prefix or lies below it (component-wise:
** "/a/bc" is not under "/a/b"). */
int lsb_path_under(const char *path, const char *prefix);

/* ---- the state root ------------------------------------------------- */

/* The state root: configured (if non-NULL and non-empty), else
** $LASH_SANDBOX_ROOT, else (as root) /var/lib/lash/sandboxes, else
** sandboxes/ in lash's state directory (userdir.h: $XDG_STATE_HOME/lash,
** else $HOME/.local/state/lash).
** Writes a normalized absolute path. Returns 0 or -errno. */
int lsb_state_root(const char *configured, char *out, size_t outsz);
/* lash's own state directory that contains the default state root (masked
** from jails): the state root's parent when its last component is
** "sandboxes", else the state root itself. */
void lsb_state_dir(const char *root, char *out, size_t outsz);

/* An open sandbox directory with its lock held. */
typedef struct lsb_box {
  int dirfd;       /* <root>/<id>, O_DIRECTORY */
  int lockfd;      /* <root>/<id>/lock, flock()ed */
  int *holds;      /* NULL: the box owns its fds; else they are borrowed
                   ** from a keeper that counts its holds of the lock */
} lsb_box;

#define LSB_BOX_INIT {-1, -1, NULL}

/* Open <root>/<id> and take its lock: `exclusive` is 0 (shared) or
** LSB_LOCK_EX, plus LSB_LOCK_TRY not to wait (-EWOULDBLOCK when another
** holds it). Returns 0, -ENOENT when the sandbox does not exist (or is
** being destroyed), or another -errno. */
#define LSB_LOCK_EX  1
#define LSB_LOCK_TRY 2
int  lsb_box_open(const char *root, const char *id, int exclusive, lsb_box *b);
/* Release the lock and close (a borrowed box: drop its hold, the last
** one unlocks); idempotent. */
void lsb_box_close(lsb_box *b);
/* Create <root>/<id> (mode 0711) with an empty lock file, locked
** exclusively. -EEXIST if the id is taken. */
int  lsb_box_create(const char *root, const char *id, lsb_box *b);

/* Write name in dirfd atomically: a temporary file, fsync, rename over
** name, fsync of the directory. Returns 0 or -errno. */
int lsb_write_atomic(int dirfd, const char *name, const void *data,
                     size_t len, mode_t mode);
/* The same without the fsyncs: readers never see a partial file, but a
** power cut may lose it (records of ephemeral sandboxes, of cgroups, which
** die with the machine anyway). */
int lsb_write_unsynced(int dirfd, const char *name, const void *data,
                       size_t len, mode_t mode);
/* fsync name in dirfd (a missing file is success). 0 or -errno. */
int lsb_sync_at(int dirfd, const char *name);
/* Read all of name (at most max bytes: -EFBIG beyond). *data is malloc'd
** and NUL-terminated. Returns 0 or -errno. */
int lsb_read_all(int dirfd, const char *name, size_t max, char **data,
                 size_t *len);
/* The same from an open fd (from its offset; it stays open). */
int lsb_read_fd(int fd, size_t max, char **data, size_t *len);
/* rm -rf of name inside dirfd without following symlinks; directories the
** owner cannot enter or write are chmod'ed first. Returns 0 or -errno
** (ENOENT is success). */
int lsb_rmtree_at(int dirfd, const char *name);
/* The same, stopping with -ETIME once CLOCK_MONOTONIC passes deadline (ns):
** what is left stays for the next call. */
int lsb_rmtree_until(int dirfd, const char *name, uint64_t deadline);

/* Job records: <box>/jobs/<pid>-<starttime>, one per running command, so
** that destroy (from any process) can kill commands still running. */
int  lsb_job_add(int dirfd, pid_t pid, char *name, size_t namesz);
void lsb_job_remove(int dirfd, const char *name);
/* SIGKILL every recorded job whose process still has the recorded start
** time. Returns the number killed. */
int  lsb_jobs_kill(int dirfd);
/* How many recorded jobs are still running. */
int  lsb_jobs_alive(int dirfd);
/* The start time of pid (field 22 of /proc/pid/stat), 0 when gone. */
unsigned long long lsb_proc_starttime(pid_t pid);


/* ---- uid reservations ----------------------------------------------- */

/* Reservations of those uids, one file per uid naming the sandbox's
** directory, shared by every state root on the host. */
#define LSB_UID_DIR "/var/lib/lash/uids"

/* Reserve a host uid for the sandbox directory box in dir: the first
** candidate from next(ud) (0 ends them) that no host account or group
** (/etc/passwd, /etc/group), running process or live reservation holds.
** dir/<uid> is created O_EXCL holding box's path; a reservation whose
** sandbox is gone is taken over. Returns 0 and *uid, or -errno (-EAGAIN:
** no candidate was free). */
int  lsb_uid_reserve(const char *dir, const char *box,
                     uint32_t (*next)(void *), void *ud, uid_t *uid);
/* Drop the reservation of uid if it is box's (or its sandbox is gone). */
void lsb_uid_release(const char *dir, uid_t uid, const char *box);

/* A record file `name` in dfd names a sandbox's directory (a uid
** reservation, a cgroup's registration): 1 while that directory exists,
** or when the record cannot be read (not ours to judge); 0 when it names
** nothing or a directory that is gone. */
int lsb_record_live(int dfd, const char *name);

#endif
