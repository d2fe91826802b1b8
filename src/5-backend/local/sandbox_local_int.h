/*
** sandbox_local_int.h: the C primitives of the local sandbox backend, no
** Lua (prefix lsb_; shared by its files and its unit test, not a public
** API):
**   sandbox_state.c  ids, the state root, per-sandbox directories, locked
**                    atomic metadata files, job records, tree removal;
**   sandbox_view.c   the sandbox's filesystem view (which host directory
**                    backs which path), path resolution, and the file
**                    operations, run in a helper child that holds the
**                    jail's credentials;
**   sandbox_jail.c   the jail policy as a bubblewrap command line, masks
**                    for host secrets, rlimits, and spawning a jailed child;
**   sandbox_super.c  the jail built once per sandbox, and the requests to
**                    its supervisor (src/5-backend/local/jaild/jaild.c) that run commands;
**   sandbox_cgroup.c the control group of each sandbox (pids, memory);
**   sandbox_disk.c   the disk quota: a filesystem of the sandbox's own.
** Path normalization is the sandbox core's (sandbox_path.h). The Lua side
** on top of these (the slots, the command engine, the file operations) is
** declared in sandbox_local_box.h.
*/
#ifndef lash_sandbox_local_int_h
#define lash_sandbox_local_int_h

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox_path.h"

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
** $XDG_STATE_HOME/lash/sandboxes, else $HOME/.local/state/lash/sandboxes.
** Writes a normalized absolute path. Returns 0 or -errno. */
int lsb_state_root(const char *configured, char *out, size_t outsz);
/* lash's own state directory that contains the default state root (masked
** from jails): the state root's parent when its last component is
** "sandboxes", else the state root itself. */
void lsb_state_dir(const char *root, char *out, size_t outsz);
/* mkdir -p with mode for the directories it creates. Returns 0 or -errno. */
int lsb_mkdirs(const char *path, mode_t mode);

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

/* ---- the view ------------------------------------------------------- */

enum { LSB_MNT_RW, LSB_MNT_RO, LSB_MNT_DENY };

/* How the jail materializes a mount (the view only cares about kind). */
enum {
  LSB_HOW_ROOTFS,    /* the rootfs: its top-level entries bound read-only */
  LSB_HOW_BIND,      /* a read-write bind of host */
  LSB_HOW_PROC,      /* a fresh /proc */
  LSB_HOW_DEV,       /* a private /dev */
  LSB_HOW_NONE,      /* part of the rootfs, only hidden from file ops */
  LSB_HOW_TMPFS,     /* a masked directory: an empty tmpfs */
  LSB_HOW_DEVNULL    /* a masked file: /dev/null bound over it */
};

#define LSB_MAX_MOUNTS 64

typedef struct lsb_mount {
  char view[LSB_PATH_MAX];   /* where it appears in the sandbox */
  char host[LSB_PATH_MAX];   /* what backs it ("" for DENY) */
  int kind;                  /* LSB_MNT_* */
  int how;                   /* LSB_HOW_* */
  int fd;                    /* O_PATH of host, -1 until lsb_view_open */
} lsb_mount;

typedef struct lsb_view {
  lsb_mount m[LSB_MAX_MOUNTS];
  int n;
} lsb_view;

typedef struct lsb_layout {
  const char *box;          /* <root>/<id> */
  const char *rootfs;       /* "/" for the host's root */
  const char *workdir;      /* normalized, absolute */
  const char *state_root;   /* masked when visible */
  int isolation_none;       /* view = the workspace only */
} lsb_layout;

/* Build the view of a sandbox: the workspace at workdir and the sandbox's
** /tmp (read-write), the rootfs (read-only), /proc, /dev and /sys (denied
** to file operations), and the masks over host secrets when rootfs is the
** host's root. The same list drives the bwrap command line. Returns 0 or
** -errno. */
int lsb_view_build(lsb_view *v, const lsb_layout *lay);
/* The mount a view path falls in (longest prefix), or NULL. */
lsb_mount *lsb_view_lookup(lsb_view *v, const char *path);
/* Open the O_PATH fds of every backed mount. Returns 0 or -errno. */
int  lsb_view_open(lsb_view *v);
void lsb_view_close(lsb_view *v);

/* Result codes of file operations (positive; 0 is success). */
enum {
  LSB_OK = 0,
  LSB_E_NOTFOUND = 1,
  LSB_E_DENIED,        /* masked, /proc, /dev, /sys, or permission */
  LSB_E_READONLY,      /* a write outside the writable mounts */
  LSB_E_NOTDIR,
  LSB_E_ISDIR,
  LSB_E_TOOLARGE,      /* a = size seen, b = the limit */
  LSB_E_NOTREG,        /* a FIFO, device or socket */
  LSB_E_LOOP,          /* too many symlinks, or a path that changed */
  LSB_E_IO,            /* err = errno */
  LSB_E_EXISTS,        /* a non-directory where a directory is needed */
  LSB_E_NAMETOOLONG
};

/* One resolved path. */
typedef struct lsb_res {
  lsb_mount *mount;
  char rel[LSB_PATH_MAX];    /* relative to mount->fd ("." for its root) */
  char view[LSB_PATH_MAX];   /* the resolved path as the sandbox sees it */
  int synthetic;             /* a directory the jail creates on the way to
                             ** a mount (e.g. /home/u for /home/u/proj);
                             ** mount may then be NULL or a mask */
  int missing;               /* components from `missing_at` on do not exist */
  size_t missing_at;         /* offset in view of the first missing one */
} lsb_res;

/* Resolve a normalized absolute view path the way the kernel would inside
** the jail: symlinks are followed through the view (an absolute target
** restarts at the sandbox's "/", never the host's), at most 40 of them.
** follow_last: follow a symlink in the final component. allow_missing:
** trailing components may be missing (res->missing is set). Returns
** LSB_OK or an LSB_E_* code (with *err set to an errno). Uses no heap:
** safe in a forked child. */
int lsb_resolve(lsb_view *v, const char *path, int follow_last,
                int allow_missing, lsb_res *res, int *err);

/* ---- file operations in a helper child ------------------------------ */

enum { LSB_OP_STAT = 1, LSB_OP_READ, LSB_OP_WRITE, LSB_OP_LIST };

/* The reply header the helper writes to its pipe, then op-specific bytes:
**   STAT: a = size, b = mtime seconds; kind and mode set; no payload.
**   READ: a = bytes that follow; payload: the bytes (at most max+1).
**   WRITE: a = bytes written.
**   LIST: payload: entries, each kind byte ('f','d','l','o') + name + NUL.
** On failure status is an LSB_E_* code, err an errno, a/b per code. */
typedef struct lsb_reply {
  int32_t status;
  int32_t err;
  int64_t a, b;
  int32_t kind;     /* 'f' file, 'd' dir, 'l' symlink, 'o' other */
  int32_t mode;     /* permission bits */
} lsb_reply;

typedef struct lsb_fileop {
  int op;
  const char *path;          /* normalized absolute view path */
  const void *data;          /* WRITE */
  size_t len;                /* WRITE */
  uint64_t max_bytes;        /* READ */
  uid_t uid; gid_t gid;      /* credentials to take (when root) */
  int drop;                  /* take them */
} lsb_fileop;

/* Run in the helper child after fork: perform op on the opened view and
** write the reply to fd. Returns an exit status. No heap use. */
int lsb_fileop_child(lsb_view *v, const lsb_fileop *op, int fd);

/* ---- the jail ------------------------------------------------------- */

typedef struct lsb_limits {
  uint64_t address_space;    /* bytes, RLIMIT_AS */
  uint64_t cpu_seconds;      /* RLIMIT_CPU */
  uint64_t open_files;       /* RLIMIT_NOFILE */
  uint64_t processes;        /* RLIMIT_NPROC (counted per host uid) */
  uint64_t file_size;        /* bytes, RLIMIT_FSIZE */
  uint64_t memory;           /* bytes, the sandbox's cgroup memory.max */
  uint64_t pids;             /* the sandbox's cgroup pids.max */
  uint64_t disk;             /* bytes: a filesystem of its own (0: none) */
} lsb_limits;

/* Defaults sized for everyday builds. */
void lsb_limits_default(lsb_limits *l);

/* A growing NULL-terminated argv/envp owned by its builder. */
typedef struct lsb_argv {
  char **v;
  size_t n, cap;
  int oom;
} lsb_argv;

void lsb_argv_init(lsb_argv *a);
void lsb_argv_add(lsb_argv *a, const char *s);
void lsb_argv_addf(lsb_argv *a, const char *fmt, ...);
void lsb_argv_free(lsb_argv *a);

/* As root, each jailed sandbox runs as its own host uid (and gid), drawn
** from this reserved range at creation: RLIMIT_NPROC and every per-uid
** count are then the sandbox's own, so a fork bomb in one cannot starve
** another. Inside the jail it is mapped to 65534 (nobody). */
#define LSB_UID_BASE 1593835520u
#define LSB_UID_RANGE (1u << 20)
#define LSB_INNER_UID 65534
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
/* The jail's private /dev/shm: a tmpfs of its own, this big at most. */
#define LSB_SHM_BYTES (64ull << 20)

typedef struct lsb_jail {
  const char *bwrap;          /* path of the bwrap binary */
  int inner_uid;              /* > 0: --uid/--gid inside the namespace */
  const lsb_view *view;
  const char *cwd;            /* normalized view path */
  int network;                /* 1: share the host's network */
  int disable_userns;         /* bwrap knows --disable-userns */
  const char *const *env;     /* "K=V" strings, NULL-terminated */
} lsb_jail;

/* The bwrap command line for one command: argv[0] is the bwrap binary,
** then the options; when argv is non-NULL, "--" and argv follow. Returns 0,
** or -ENOMEM. */
int lsb_jail_argv(const lsb_jail *j, const char *const *argv, lsb_argv *out);

/* A spawned child and the parent's ends of its pipes. */
typedef struct lsb_spawn {
  pid_t pid;
  int in_fd;       /* write end of stdin, -1 when stdin is /dev/null */
  int out_fd;      /* read end of stdout */
  int err_fd;      /* read end of stderr */
} lsb_spawn;

typedef struct lsb_spawn_opts {
  const char *path;            /* executable: with a slash as given (after
                               ** chdir), else searched in `search` */
  const char *search;          /* PATH for a path without a slash, searched
                               ** by the child as execvp does ("": the
                               ** default); NULL: path is used as is */
  char *const *argv;
  char *const *envp;
  const char *chdir;           /* host directory to start in, or NULL */
  const lsb_limits *limits;    /* NULL: leave the limits as they are */
  int drop;                    /* take uid/gid (we are root) */
  uid_t uid; gid_t gid;
  int new_session;             /* setsid(): its own process group */
  int want_stdin;
  int pass_fd;                 /* > 0: handed to the child as fd 4 */
  int pass_fd2;                /* > 0: handed to the child as fd 5 */
  int pass_fd3;                /* > 0: handed to the child as fd 6 */
  int pass_fd4;                /* > 0: handed to the child as fd 7 */
  int pass_fd5;                /* > 0: handed to the child as fd 8 */
  int fresh_keyring;           /* 1: a new session keyring of its own
                               ** (a jail: none of the host's keys) */
  int outputs;                 /* 0: none (stdout/stderr to /dev/null),
                               ** 2: stdout and stderr pipes */
  int join_cgroup;             /* 1: the child joins cgroup_fds */
  int cgroup_fds[2];           /* cgroup.procs of the sandbox's group
                               ** (lsb_cgroup_open); -1 when absent */
} lsb_spawn_opts;

/* fork + exec with every fd but the pipes closed, the parent-death signal
** set, limits and credentials applied. The parent ends are non-blocking and
** close-on-exec. On an exec failure in the child the child is reaped and
** -errno returned (*stage names the step that failed). Returns 0 or
** -errno. */
int lsb_spawn_child(const lsb_spawn_opts *o, lsb_spawn *sp,
                    const char **stage);

/* Find an executable by name in PATH (or take it as given when it contains
** a slash). Returns 0 or -ENOENT. */
int lsb_find_exe(const char *name, const char *path, char *out, size_t outsz);

/* 1 if every directory from / down to path can be searched by uid/gid
** (mode bits; ACLs are not consulted). On 0, *where names the first one
** that cannot. */
int lsb_traversable(const char *path, uid_t uid, gid_t gid, char *where,
                    size_t wheresz);

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
