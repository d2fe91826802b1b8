/*
** sandbox_jail.c: the local backend's jail. Turns a sandbox's view (see
** sandbox_view.c) into a bubblewrap command line -- new user, pid, ipc,
** uts, cgroup and (unless the policy allows it) network namespaces; the
** rootfs read-only under a read-only tmpfs root; the workspace and the
** sandbox's /tmp read-write; masks over host secrets; a fresh /proc and a
** private /dev; a cleared environment -- and spawns it: every fd but the
** pipes closed, the sandbox's cgroup joined (sandbox_cgroup.c), rlimits
** set, the parent-death signal armed and, when lash runs as root, the
** credentials of an unprivileged uid taken before bwrap runs, so the jail
** holds no host privilege at all.
*/
#include "sandbox_jail.h"
#include "sandbox_cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/keyctl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- limits --------------------------------------------------------- */

void lsb_limits_default(lsb_limits *l) {
  l->address_space = 8ull << 30;   /* runtimes reserve far more than they use */
  l->cpu_seconds = 3600;
  l->open_files = 4096;
  l->processes = 2048;             /* per host uid, and as root each sandbox
                                   ** has its own (LSB_UID_BASE) */
  l->file_size = 8ull << 30;
  /* the sandbox's cgroup: all its processes together */
  l->pids = 2048;
  l->disk = 0;                     /* the default is the state root's
                                   ** (lsb_disk_default), chosen at create
                                   ** and made at the first use */
  l->memory = 8ull << 30;
  {
    /* at most half the machine, so one sandbox cannot take it all */
    struct sysinfo si;
    if (sysinfo(&si) == 0 && si.totalram > 0) {
      uint64_t half = (uint64_t)si.totalram * si.mem_unit / 2;
      if (half >= (64ull << 20) && half < l->memory) l->memory = half;
    }
  }
}

/* ---- argv ----------------------------------------------------------- */

void lsb_argv_init(lsb_argv *a) {
  a->v = NULL;
  a->n = a->cap = 0;
  a->oom = 0;
}

static void argv_push(lsb_argv *a, char *s) {
  if (!s) {
    a->oom = 1;
    return;
  }
  if (a->n + 2 > a->cap) {
    size_t nc = a->cap ? a->cap * 2 : 64;
    char **nv = realloc(a->v, nc * sizeof *nv);
    if (!nv) {
      free(s);
      a->oom = 1;
      return;
    }
    a->v = nv;
    a->cap = nc;
  }
  a->v[a->n++] = s;
  a->v[a->n] = NULL;
}

void lsb_argv_add(lsb_argv *a, const char *s) {
  argv_push(a, strdup(s));
}

void lsb_argv_addf(lsb_argv *a, const char *fmt, ...) {
  va_list ap;
  char *s = NULL;
  va_start(ap, fmt);
  if (vasprintf(&s, fmt, ap) < 0) s = NULL;
  va_end(ap);
  argv_push(a, s);
}

void lsb_argv_free(lsb_argv *a) {
  size_t i;
  for (i = 0; i < a->n; i++) free(a->v[i]);
  free(a->v);
  lsb_argv_init(a);
}

/* ---- the command line ----------------------------------------------- */

static int masked_whole(const lsb_view *v, const char *viewpath) {
  int i;
  for (i = 0; i < v->n; i++)
    if (v->m[i].how == LSB_HOW_TMPFS && strcmp(v->m[i].view, viewpath) == 0)
      return 1;
  return 0;
}

/* Bind the rootfs's top-level entries one by one under bwrap's tmpfs root
** (rather than the rootfs itself at "/") so that the workdir and the other
** mount points can be created in that root when the rootfs lacks them. */
static int rootfs_entries(const lsb_view *v, const char *rootfs,
                          lsb_argv *out) {
  DIR *d = opendir(rootfs);
  struct dirent *e;
  int host = strcmp(rootfs, "/") == 0;
  if (!d) return -errno;
  while ((e = readdir(d)) != NULL) {
    char vp[LSB_PATH_MAX], hp[LSB_PATH_MAX];
    struct stat st;
    const char *n = e->d_name;
    if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0 || strcmp(n, "proc") == 0 ||
        strcmp(n, "dev") == 0 || strcmp(n, "tmp") == 0)
      continue;
    snprintf(vp, sizeof vp, "/%s", n);
    snprintf(hp, sizeof hp, "%s%s%s", rootfs, host ? "" : "/", n);
    if (masked_whole(v, vp)) continue;
    if (lstat(hp, &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      char target[LSB_PATH_MAX];
      ssize_t tl = readlink(hp, target, sizeof target - 1);
      if (tl < 0) continue;
      target[tl] = '\0';
      lsb_argv_add(out, "--symlink");
      lsb_argv_add(out, target);
      lsb_argv_add(out, vp);
    } else {
      lsb_argv_add(out, "--ro-bind");
      lsb_argv_add(out, hp);
      lsb_argv_add(out, vp);
    }
  }
  closedir(d);
  return 0;
}

int lsb_jail_argv(const lsb_jail *j, const char *const *argv, lsb_argv *out) {
  const lsb_view *v = j->view;
  int i, rc;
  lsb_argv_add(out, j->bwrap);
  lsb_argv_add(out, "--unshare-user");
  lsb_argv_add(out, "--unshare-ipc");
  lsb_argv_add(out, "--unshare-pid");
  lsb_argv_add(out, "--unshare-uts");
  lsb_argv_add(out, "--unshare-cgroup-try");
  if (!j->network) lsb_argv_add(out, "--unshare-net");
  if (j->inner_uid > 0) {
    lsb_argv_add(out, "--uid");
    lsb_argv_addf(out, "%d", j->inner_uid);
    lsb_argv_add(out, "--gid");
    lsb_argv_addf(out, "%d", j->inner_uid);
  }
  if (j->disable_userns) lsb_argv_add(out, "--disable-userns");
  lsb_argv_add(out, "--die-with-parent");
  lsb_argv_add(out, "--new-session");
  lsb_argv_add(out, "--hostname");
  lsb_argv_add(out, "sandbox");
  for (i = 0; i < v->n; i++) {
    const lsb_mount *m = &v->m[i];
    switch (m->how) {
    case LSB_HOW_ROOTFS:
      if ((rc = rootfs_entries(v, m->host, out)) != 0) return rc;
      break;
    case LSB_HOW_PROC:
      lsb_argv_add(out, "--proc");
      lsb_argv_add(out, m->view);
      break;
    case LSB_HOW_DEV:
      lsb_argv_add(out, "--dev");
      lsb_argv_add(out, m->view);
      /* shared memory in a tmpfs of the jail's own, bounded in size,
      ** instead of a directory of bwrap's /dev */
      if (strcmp(m->view, "/dev") == 0) {
        lsb_argv_add(out, "--perms");
        lsb_argv_add(out, "1777");
        lsb_argv_add(out, "--size");
        lsb_argv_addf(out, "%llu", (unsigned long long)LSB_SHM_BYTES);
        lsb_argv_add(out, "--tmpfs");
        lsb_argv_add(out, "/dev/shm");
      }
      break;
    case LSB_HOW_TMPFS:
      lsb_argv_add(out, "--tmpfs");
      lsb_argv_add(out, m->view);
      break;
    case LSB_HOW_DEVNULL:
      lsb_argv_add(out, "--ro-bind");
      lsb_argv_add(out, "/dev/null");
      lsb_argv_add(out, m->view);
      break;
    case LSB_HOW_BIND:
      lsb_argv_add(out, "--bind");
      lsb_argv_add(out, m->host);
      lsb_argv_add(out, m->view);
      break;
    default:
      break;
    }
  }
  /* the tmpfs root itself: files written outside the workspace and /tmp
  ** fail instead of vanishing with the command */
  lsb_argv_add(out, "--remount-ro");
  lsb_argv_add(out, "/");
  lsb_argv_add(out, "--chdir");
  lsb_argv_add(out, j->cwd);
  lsb_argv_add(out, "--clearenv");
  if (j->env) {
    for (i = 0; j->env[i]; i++) {
      const char *eq = strchr(j->env[i], '=');
      if (!eq) continue;
      lsb_argv_add(out, "--setenv");
      lsb_argv_addf(out, "%.*s", (int)(eq - j->env[i]), j->env[i]);
      lsb_argv_add(out, eq + 1);
    }
  }
  if (argv) {
    lsb_argv_add(out, "--");
    for (i = 0; argv[i]; i++) lsb_argv_add(out, argv[i]);
  }
  return out->oom ? -ENOMEM : 0;
}

/* ---- executables and permissions ------------------------------------ */

int lsb_find_exe(const char *name, const char *path, char *out,
                 size_t outsz) {
  const char *p;
  if (!name || !*name) return -ENOENT;
  if (strchr(name, '/')) {
    if (access(name, X_OK) != 0) return -errno;
    snprintf(out, outsz, "%s", name);
    return 0;
  }
  p = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
  while (*p) {
    size_t n = strcspn(p, ":");
    struct stat st;
    if (n > 0 && (size_t)snprintf(out, outsz, "%.*s/%s", (int)n, p, name) <
                     outsz &&
        stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
      return 0;
    p += n;
    if (*p == ':') p++;
  }
  return -ENOENT;
}

static int can_search(const struct stat *st, uid_t uid, gid_t gid) {
  if (uid == 0) return 1;
  if (st->st_uid == uid) return (st->st_mode & S_IXUSR) != 0;
  if (st->st_gid == gid) return (st->st_mode & S_IXGRP) != 0;
  return (st->st_mode & S_IXOTH) != 0;
}

int lsb_traversable(const char *path, uid_t uid, gid_t gid, char *where,
                    size_t wheresz) {
  char buf[LSB_PATH_MAX];
  size_t i, n = strlen(path);
  struct stat st;
  if (n >= sizeof buf) return 0;
  memcpy(buf, path, n + 1);
  for (i = 1; i <= n; i++) {
    if (buf[i] == '/' || buf[i] == '\0') {
      char c = buf[i];
      buf[i] = '\0';
      if (stat(i == 0 ? "/" : buf, &st) != 0 || !can_search(&st, uid, gid)) {
        snprintf(where, wheresz, "%s", buf);
        return 0;
      }
      buf[i] = c;
    }
  }
  if (stat("/", &st) != 0 || !can_search(&st, uid, gid)) {
    snprintf(where, wheresz, "/");
    return 0;
  }
  return 1;
}

/* ---- spawning ------------------------------------------------------- */

struct spawn_err {
  int err;
  int stage;
};

static const char *const stages[] = {
  "exec", "dup2", "setsid", "chdir", "setrlimit", "setgroups", "setgid",
  "setuid", "prctl", "cgroup"
};

/* Where a child that cannot exec says why: the memory it shares with the
** parent, which waits (vfork) until it has exec'd or exited, else a
** close-on-exec pipe the parent reads (plain fork). */
typedef struct child_report {
  volatile struct spawn_err *mem;
  int fd;
} child_report;

static void child_fail(const child_report *r, int stage) {
  struct spawn_err se;
  se.err = errno;
  se.stage = stage;
  if (r->mem) {
    r->mem->err = se.err;
    r->mem->stage = se.stage;
  } else if (write(r->fd, &se, sizeof se) < 0) {
    /* the parent sees EOF: nothing to add */
  }
  _exit(127);
}

static void set_limit(int res, uint64_t want) {
  struct rlimit cur, nl;
  if (getrlimit(res, &cur) != 0) return;
  nl.rlim_max = want;
  if (cur.rlim_max != RLIM_INFINITY && nl.rlim_max > cur.rlim_max)
    nl.rlim_max = cur.rlim_max;   /* cannot raise the hard limit */
  nl.rlim_cur = nl.rlim_max;
  setrlimit(res, &nl);
}

static void close_from(int lo) {
  if (syscall(SYS_close_range, (unsigned)lo, ~0u, 0u) != 0) {
    long max = sysconf(_SC_OPEN_MAX), fd;
    if (max < 0 || max > 65536) max = 65536;
    for (fd = lo; fd < max; fd++) close((int)fd);
  }
}

/* execvp's search, in the child (no heap: it may share our memory): each
** directory of o->search in turn, as the command's own uid, in its cwd;
** one it may not run (EACCES) does not stop the search. Returns only on
** failure, errno set (ENOENT when there was none, EACCES when only such
** ones). */
static void exec_in_path(const lsb_spawn_opts *o) {
  char buf[LSB_PATH_MAX];
  const char *p = *o->search ? o->search : "/usr/local/bin:/usr/bin:/bin";
  size_t nl = strlen(o->path);
  int denied = 0;
  if (nl == 0) {
    errno = ENOENT;
    return;
  }
  while (*p) {
    size_t n = strcspn(p, ":");
    if (n > 0 && n + 1 + nl < sizeof buf) {
      memcpy(buf, p, n);
      buf[n] = '/';
      memcpy(buf + n + 1, o->path, nl + 1);
      execve(buf, o->argv, o->envp);
      if (errno == EACCES) denied = 1;
      else if (errno != ENOENT && errno != ENOTDIR) return;
    }
    p += n;
    if (*p == ':') p++;
  }
  errno = denied ? EACCES : ENOENT;
}

/* in < 0: /dev/null. rep: see child_report (its fd is moved to 3). */
static void child_main(const lsb_spawn_opts *o, int in, int outw, int errw,
                       child_report *rep, pid_t parent) {
  sigset_t all;
  int sig;
  const child_report *st = rep;
  /* into the sandbox's cgroup first, while we still may (root's
  ** credentials), so that everything below and after exec is counted */
  if (o->join_cgroup && lsb_cgroup_enter(o->cgroup_fds) != 0)
    child_fail(st, 9);
  if (in < 0 && (in = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0)
    child_fail(st, 1);
  /* move everything above 9 first so that the dup2s below cannot clobber
  ** a source that happens to sit on 0..3 */
  in = fcntl(in, F_DUPFD, 10);
  outw = fcntl(outw, F_DUPFD, 10);
  errw = fcntl(errw, F_DUPFD, 10);
  if (!rep->mem && (rep->fd = fcntl(rep->fd, F_DUPFD_CLOEXEC, 10)) < 0)
    _exit(127);
  if (in < 0 || outw < 0 || errw < 0 || dup2(in, 0) < 0 || dup2(outw, 1) < 0 ||
      dup2(errw, 2) < 0)
    child_fail(st, 1);
  {
    /* both moved up first, so that dup2 onto 4 cannot clobber the other */
    int p1 = o->pass_fd > 0 ? fcntl(o->pass_fd, F_DUPFD, 10) : -1;
    int p2 = o->pass_fd2 > 0 ? fcntl(o->pass_fd2, F_DUPFD, 10) : -1;
    int p3 = o->pass_fd3 > 0 ? fcntl(o->pass_fd3, F_DUPFD, 10) : -1;
    int p4 = o->pass_fd4 > 0 ? fcntl(o->pass_fd4, F_DUPFD, 10) : -1;
    int p5 = o->pass_fd5 > 0 ? fcntl(o->pass_fd5, F_DUPFD, 10) : -1;
    if ((o->pass_fd > 0 && (p1 < 0 || dup2(p1, 4) < 0)) ||
        (o->pass_fd2 > 0 && (p2 < 0 || dup2(p2, 5) < 0)) ||
        (o->pass_fd3 > 0 && (p3 < 0 || dup2(p3, 6) < 0)) ||
        (o->pass_fd4 > 0 && (p4 < 0 || dup2(p4, 7) < 0)) ||
        (o->pass_fd5 > 0 && (p5 < 0 || dup2(p5, 8) < 0)))
      child_fail(st, 1);
  }
  if (rep->mem) close(3);
  else if (dup3(rep->fd, 3, O_CLOEXEC) < 0) child_fail(st, 1);
  else rep->fd = 3;
  /* the highest fd handed over, and above it nothing (a gap below it is
  ** closed too: fds 4..8 are only ever the ones passed) */
  {
    int top = o->pass_fd5 > 0 ? 8 : o->pass_fd4 > 0 ? 7 : o->pass_fd3 > 0 ? 6 :
              o->pass_fd2 > 0 ? 5 : o->pass_fd > 0 ? 4 : 3, fd;
    for (fd = 4; fd < top; fd++) {
      int given = (fd == 4 && o->pass_fd > 0) || (fd == 5 && o->pass_fd2 > 0) ||
                  (fd == 6 && o->pass_fd3 > 0) || (fd == 7 && o->pass_fd4 > 0);
      if (!given) close(fd);
    }
    close_from(top + 1);
  }
  /* the loop's signal state is not the command's */
  for (sig = 1; sig < NSIG; sig++) {
    struct sigaction sa;
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigaction(sig, &sa, NULL);
  }
  sigemptyset(&all);
  sigprocmask(SIG_SETMASK, &all, NULL);   /* the parent blocked everything */
  if (o->new_session && setsid() < 0) child_fail(st, 2);
  if (o->chdir && chdir(o->chdir) != 0) child_fail(st, 3);
  if (o->limits) {
    const lsb_limits *l = o->limits;
    if (l->address_space) set_limit(RLIMIT_AS, l->address_space);
    if (l->cpu_seconds) set_limit(RLIMIT_CPU, l->cpu_seconds);
    if (l->open_files) set_limit(RLIMIT_NOFILE, l->open_files);
    if (l->processes) set_limit(RLIMIT_NPROC, l->processes);
    if (l->file_size) set_limit(RLIMIT_FSIZE, l->file_size);
    set_limit(RLIMIT_CORE, 0);
  }
  if (o->drop) {
    if (syscall(SYS_setgroups, 0, NULL) != 0) child_fail(st, 5);
    if (syscall(SYS_setresgid, o->gid, o->gid, o->gid) != 0) child_fail(st, 6);
    if (syscall(SYS_setresuid, o->uid, o->uid, o->uid) != 0) child_fail(st, 7);
  }
  /* a session keyring of the jail's own, made under its credentials: the
  ** host's (an ssh login's, a service's) is not inherited into the jail */
  if (o->fresh_keyring) syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL);
  /* after the credential change, which clears it */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) child_fail(st, 8);
  if (getppid() != parent) _exit(127);
  if (o->search && !strchr(o->path, '/')) exec_in_path(o);
  else execve(o->path, o->argv, o->envp);
  child_fail(st, 0);
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LSB_HAS_ASAN 1
#endif
#endif
#ifndef LSB_HAS_ASAN
#define LSB_HAS_ASAN 0
#endif

#if !(defined(__SANITIZE_ADDRESS__) || LSB_HAS_ASAN)
struct child_args {
  const lsb_spawn_opts *o;
  int in, outw, errw;
  child_report rep;
  pid_t parent;
};

static int child_entry(void *p) {
  struct child_args *a = p;
  child_main(a->o, a->in, a->outw, a->errw, &a->rep, a->parent);
  return 127;
}

#define CHILD_STACK (64 * 1024)
#endif

int lsb_spawn_child(const lsb_spawn_opts *o, lsb_spawn *sp,
                    const char **stage) {
  int inp[2] = {-1, -1}, outp[2] = {-1, -1}, errp[2] = {-1, -1};
  int stp[2] = {-1, -1}, devnull = -1, rc = 0;
  pid_t parent = getpid(), pid;
  struct spawn_err se;
  sp->pid = -1;
  sp->in_fd = sp->out_fd = sp->err_fd = -1;
  se.err = 0;
  se.stage = -1;
  *stage = "pipe";
  if (o->want_stdin && pipe2(inp, O_CLOEXEC) != 0) goto fail;
  if (o->outputs && (pipe2(outp, O_CLOEXEC) != 0 || pipe2(errp, O_CLOEXEC) != 0))
    goto fail;
  /* without outputs they go to /dev/null; stdin without a pipe is opened
  ** by the child */
  if (!o->outputs && (devnull = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0)
    goto fail;
  *stage = "fork";
#if defined(__SANITIZE_ADDRESS__) || LSB_HAS_ASAN
  /* AddressSanitizer cannot follow a child running on a borrowed stack in
  ** our memory: a plain fork under it, and a pipe for its failure */
  {
    child_report rep;
    ssize_t n;
    if (pipe2(stp, O_CLOEXEC) != 0) goto fail;
    rep.mem = NULL;
    rep.fd = stp[1];
    pid = fork();
    if (pid < 0) goto fail;
    if (pid == 0)
      child_main(o, o->want_stdin ? inp[0] : -1,
                 o->outputs ? outp[1] : devnull, o->outputs ? errp[1] : devnull,
                 &rep, parent);
    close(stp[1]);
    stp[1] = -1;
    /* EOF means execve succeeded (the pipe was close-on-exec) */
    do n = read(stp[0], &se, sizeof se);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof se) se.stage = -1;
  }
#else
  {
    /* vfork-style, as posix_spawn does: the child borrows our memory until
    ** it execs (no page tables to copy from a big Lua heap), so it runs
    ** only syscalls, with every signal blocked until it has reset them; we
    ** go on once it has exec'd or exited, and a failure is in se */
    struct child_args ca;
    sigset_t all, old;
    char *stack = malloc(CHILD_STACK);
    if (!stack) {
      errno = ENOMEM;
      goto fail;
    }
    ca.o = o;
    ca.in = o->want_stdin ? inp[0] : -1;
    ca.outw = o->outputs ? outp[1] : devnull;
    ca.errw = o->outputs ? errp[1] : devnull;
    ca.rep.mem = &se;
    ca.rep.fd = -1;
    ca.parent = parent;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    pid = clone(child_entry, stack + CHILD_STACK, CLONE_VM | CLONE_VFORK | SIGCHLD,
                &ca);
    {
      int e = errno;
      sigprocmask(SIG_SETMASK, &old, NULL);
      free(stack);
      errno = e;
    }
    if (pid < 0) goto fail;
  }
#endif
  if (inp[0] >= 0) close(inp[0]);
  if (outp[1] >= 0) close(outp[1]);
  if (errp[1] >= 0) close(errp[1]);
  inp[0] = outp[1] = errp[1] = -1;
  if (devnull >= 0) close(devnull);
  devnull = -1;
  if (se.stage >= 0) {
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    *stage = se.stage < (int)(sizeof stages / sizeof *stages)
                 ? stages[se.stage] : "exec";
    rc = -(se.err ? se.err : EIO);
    goto cleanup;
  }
  if (stp[0] >= 0) close(stp[0]);
  stp[0] = -1;
  *stage = NULL;
  sp->pid = pid;
  sp->in_fd = inp[1];
  sp->out_fd = outp[0];
  sp->err_fd = errp[0];
  if (sp->in_fd >= 0) fcntl(sp->in_fd, F_SETFL, O_NONBLOCK);
  if (sp->out_fd >= 0) fcntl(sp->out_fd, F_SETFL, O_NONBLOCK);
  if (sp->err_fd >= 0) fcntl(sp->err_fd, F_SETFL, O_NONBLOCK);
  return 0;
fail:
  rc = -errno;
cleanup:
  if (stp[0] >= 0) close(stp[0]);
  if (stp[1] >= 0) close(stp[1]);
  if (inp[0] >= 0) close(inp[0]);
  if (inp[1] >= 0) close(inp[1]);
  if (outp[0] >= 0) close(outp[0]);
  if (outp[1] >= 0) close(outp[1]);
  if (errp[0] >= 0) close(errp[0]);
  if (errp[1] >= 0) close(errp[1]);
  if (devnull >= 0) close(devnull);
  return rc;
}
