/*
** sandbox_jail.h: the jail of a local sandbox, no Lua: its policy as a
** bubblewrap command line, rlimits, the host uid each sandbox runs as, and
** spawning a child with all of that applied (sandbox_jail.c).
*/
#ifndef lash_sandbox_jail_h
#define lash_sandbox_jail_h

#include <stdint.h>
#include <sys/types.h>

#include "sandbox_view.h"

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

#endif
