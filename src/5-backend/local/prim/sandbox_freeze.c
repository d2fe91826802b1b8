/*
** sandbox_freeze.c: the cgroup freezer for a sandbox, so the host reads a
** workspace (a snapshot) while none of the sandbox's processes can change
** it. cgroup v2 freezes the sandbox's own group (cgroup.freeze). cgroup v1
** has the freezer as a hierarchy of its own, which lash's groups do not
** use: the sandbox's processes are moved into a freezer group of the same
** relative path as its pids group, frozen, and the pids group is listed
** again until none of its processes is outside (a frozen process cannot
** fork, so this ends). A frozen group must never outlive the freezer: a
** guard child, in a process group of its own with the terminal's signals
** ignored, waits on a pipe and thaws the group when the pipe closes, which
** happens when lash thaws or dies. Where the v1 freezer group lies, and its
** thawing and removal with the sandbox's group, are sandbox_cgroup.c's.
*/
#include "sandbox_freeze.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FREEZE_WAIT_NS 3000000000ull   /* a process in D state may take a while */
#define FREEZE_ROUNDS 64

static int put(const char *path, const char *s) {
  int fd = open(path, O_WRONLY | O_CLOEXEC), rc = 0;
  size_t n = strlen(s);
  if (fd < 0) return -errno;
  if (write(fd, s, n) != (ssize_t)n) rc = -errno;
  close(fd);
  return rc;
}

static int get(const char *path, char *buf, size_t sz) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t n, got = 0;
  if (fd < 0) return -errno;
  while ((size_t)got < sz - 1 && (n = read(fd, buf + got, sz - 1 - (size_t)got)) > 0)
    got += n;
  close(fd);
  buf[got] = '\0';
  return 0;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Has the state file reached frozen? */
static int is_frozen(int version, const char *state) {
  char p[LSB_PATH_MAX + 32], buf[512];
  if (version == 1) return get(state, buf, sizeof buf) == 0 && strncmp(buf, "FROZEN", 6) == 0;
  snprintf(p, sizeof p, "%.*s/cgroup.events", (int)(strrchr(state, '/') - state), state);
  return get(p, buf, sizeof buf) == 0 && strstr(buf, "frozen 1") != NULL;
}

static int wait_frozen(int version, const char *state) {
  uint64_t until = now_ns() + FREEZE_WAIT_NS;
  struct timespec ms = {0, 1000000};
  while (!is_frozen(version, state)) {
    if (now_ns() >= until) return -EBUSY;
    nanosleep(&ms, NULL);
  }
  return 0;
}

static int cmp_long(const void *a, const void *b) {
  long x = *(const long *)a, y = *(const long *)b;
  return (x > y) - (x < y);
}

/* The pids listed in a cgroup.procs, sorted, in *out (malloc'd); count. */
static long procs(const char *dir, long **out) {
  char p[LSB_PATH_MAX + 32], *buf, *s, *e;
  long n = 0, *v;
  size_t cap = 1 << 16;
  *out = NULL;
  snprintf(p, sizeof p, "%s/cgroup.procs", dir);
  if (!(buf = malloc(cap))) return -ENOMEM;
  if (get(p, buf, cap) != 0) {
    free(buf);
    return -errno;
  }
  if (!(v = malloc(sizeof *v * (cap / 2)))) {
    free(buf);
    return -ENOMEM;
  }
  for (s = buf; *s; s = e) {
    long pid = strtol(s, &e, 10);
    if (e == s) break;
    while (*e == '\n') e++;
    if (pid > 0) v[n++] = pid;
  }
  free(buf);
  qsort(v, (size_t)n, sizeof *v, cmp_long);
  *out = v;
  return n;
}

/* v1: move the processes of the pids group not yet in the freezer group
** at fdir into it; how many were outside. */
static int v1_gather(const lsb_cgroup *cg, const char *fdir) {
  char q[LSB_PATH_MAX + 32];
  long *all, *in, na, ni, i;
  int outside = 0, fd;
  if ((na = procs(cg->dir[0], &all)) < 0) return (int)na;
  if ((ni = procs(fdir, &in)) < 0) {
    free(all);
    return (int)ni;
  }
  snprintf(q, sizeof q, "%s/cgroup.procs", fdir);
  fd = open(q, O_WRONLY | O_CLOEXEC);
  for (i = 0; fd >= 0 && i < na; i++) {
    char num[24];
    int n;
    if (bsearch(&all[i], in, (size_t)ni, sizeof *in, cmp_long)) continue;
    outside++;
    n = snprintf(num, sizeof num, "%ld", all[i]);
    if (write(fd, num, (size_t)n) != n) { /* ESRCH: it exited */ }
  }
  if (fd >= 0) close(fd);
  free(all);
  free(in);
  return fd < 0 ? -ENOENT : outside;
}

/* The guard: thaws state when the pipe's write end closes. After fork only
** async-signal-safe calls. */
static pid_t start_guard(const char *state, const char *thaw, int *wfd) {
  int p[2];
  pid_t pid;
  if (pipe2(p, O_CLOEXEC) != 0) return -1;
  pid = fork();
  if (pid < 0) {
    close(p[0]);
    close(p[1]);
    return -1;
  }
  if (pid == 0) {
    char c;
    int fd;
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    setpgid(0, 0);
    close(p[1]);
    while (read(p[0], &c, 1) < 0 && errno == EINTR) {}
    fd = open(state, O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
      ssize_t w = write(fd, thaw, strlen(thaw));
      (void)w;
      close(fd);
    }
    _exit(0);
  }
  close(p[0]);
  *wfd = p[1];
  return pid;
}

void lsb_thaw(lsb_frozen *fz) {
  if (fz->version) put(fz->state, fz->version == 2 ? "0" : "THAWED");
  fz->version = 0;
  if (fz->guard_fd >= 0) close(fz->guard_fd);
  fz->guard_fd = -1;
  if (fz->guard > 0)
    while (waitpid(fz->guard, NULL, 0) < 0 && errno == EINTR) {}
  fz->guard = -1;
}

int lsb_freeze(const lsb_cgroup *cg, lsb_frozen *fz, char *why, size_t whysz) {
  char fdir[LSB_PATH_MAX];
  int rc, round;
  fz->version = 0;
  fz->guard = -1;
  fz->guard_fd = -1;
  why[0] = '\0';
  if (cg->version == 2) {
    snprintf(fz->state, sizeof fz->state, "%s/cgroup.freeze", cg->dir[0]);
    if (access(fz->state, F_OK) != 0) return 0;   /* a kernel before 5.2 */
  } else if (cg->version == 1) {
    if (lsb_cgroup_freezer_dir(cg, fdir, sizeof fdir) != 0) return 0;
    if ((rc = lash_mkdirs(fdir, 0755)) != 0) {
      snprintf(why, whysz, "cannot make the freezer group %s (%s)", fdir, strerror(-rc));
      return rc;
    }
    snprintf(fz->state, sizeof fz->state, "%s/freezer.state", fdir);
  } else {
    return 0;
  }
  fz->guard = start_guard(fz->state, cg->version == 2 ? "0" : "THAWED", &fz->guard_fd);
  if (fz->guard < 0) {
    rc = -errno;
    snprintf(why, whysz, "cannot start the freezer's guard (%s)", strerror(errno));
    return rc;
  }
  fz->version = cg->version;
  if (cg->version == 2) {
    if ((rc = put(fz->state, "1")) == 0) rc = wait_frozen(2, fz->state);
  } else {
    /* frozen processes cannot fork: a few rounds catch the stragglers */
    rc = -EBUSY;
    for (round = 0; round < FREEZE_ROUNDS; round++) {
      int outside = v1_gather(cg, fdir);
      if (outside < 0) {
        rc = outside;
        break;
      }
      if (round > 0 && outside == 0) {
        rc = 0;
        break;
      }
      if ((rc = put(fz->state, "FROZEN")) != 0 || (rc = wait_frozen(1, fz->state)) != 0)
        break;
      rc = -EBUSY;
    }
  }
  if (rc) {
    snprintf(why, whysz, "cannot freeze %s (%s)", fz->state, strerror(-rc));
    lsb_thaw(fz);
  }
  return rc ? rc : 1;
}
